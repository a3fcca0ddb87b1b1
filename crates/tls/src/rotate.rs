//! Rotating the cluster CA of a running cluster without downtime
//! (`kvctl certs rotate`).
//!
//! A rotation moves a certificate directory (the one `kvctl certs init`
//! wrote: `ca.pem`, `ca.key`, `<name>.pem`/`<name>.key` per identity) to a
//! new CA in three steps, each followed by a reload of every node
//! (SIGHUP) and of every long-running client, so that at no moment does a
//! peer present a certificate another one does not trust:
//!
//! 1. [`RotationStep::Begin`]: makes a new CA and, for every identity in
//!    the directory (same role, same name), a new certificate and key,
//!    staged in `next/`; keeps copies of the old `ca.pem` and `ca.key` in
//!    `previous/`; then replaces `ca.pem` with a bundle of the old CA and
//!    the new one. After the reload every node still presents its old
//!    certificate and accepts both CAs.
//! 2. [`RotationStep::Switch`]: copies every old certificate and key into
//!    `previous/` and moves the new ones from `next/` into place (each file
//!    replaced atomically, by a rename). After the reload every node
//!    presents its new certificate, which every peer trusts since step 1.
//! 3. [`RotationStep::Finish`]: moves the new `ca.key` and `ca.pem` (the
//!    new CA alone) into place and removes `next/`. After the reload the old
//!    CA is trusted nowhere. `previous/` keeps the old CA (key included)
//!    and the old certificates until the operator deletes it; a new
//!    rotation refuses to begin while it is there.
//!
//! [`RotationStep::Abort`] undoes step 1 (before step 2 only): `ca.pem` is
//! the old CA alone again and `next/` and `previous/` are gone.
//!
//! Every step checks the state it starts from ([`rotation_state`]) and
//! refuses, saying which step is due, when run out of order; one that was
//! interrupted (a crash, a full disk) can be run again and finishes what
//! it began. Files are written to a `.partial` name and renamed, so a
//! node reloading mid-step reads either the old file or the new one,
//! never half of one (between a certificate and its key it may see a
//! mismatched pair: it refuses that reload and keeps its configuration;
//! reload again after the step).

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use rustls_pki_types::CertificateDer;

use crate::generate::{Access, create_dir, load_ca, new_ca, sign_leaf, write_file};
use crate::load::{fingerprint, load_ca_bundle, read_bounded, read_certs};
use crate::role::{PeerIdentity, peer_identity};
use crate::verify::check_trusted;
use crate::{Error, Result};

/// The subdirectory where [`RotationStep::Begin`] stages the new CA and
/// certificates.
pub const NEXT_DIR: &str = "next";

/// The subdirectory where a rotation keeps the old CA and certificates it
/// replaced.
pub const PREVIOUS_DIR: &str = "previous";

/// Where `next/` is built before it is renamed into place.
const NEXT_PARTIAL: &str = "next.partial";

/// The most directory entries a rotation reads in a certificate directory
/// (or in `next/`); more means it is not one.
pub const MAX_DIR_ENTRIES: usize = 4096;

/// One step of a CA rotation (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RotationStep {
    /// Make the new CA and certificates; trust the old and the new CA.
    Begin,
    /// Present the new certificates.
    Switch,
    /// Trust only the new CA.
    Finish,
    /// Undo [`RotationStep::Begin`] (before [`RotationStep::Switch`]).
    Abort,
}

impl RotationStep {
    /// The step's name as `kvctl certs rotate` takes it: `begin`,
    /// `switch`, `finish` or `abort`.
    pub fn as_str(self) -> &'static str {
        match self {
            RotationStep::Begin => "begin",
            RotationStep::Switch => "switch",
            RotationStep::Finish => "finish",
            RotationStep::Abort => "abort",
        }
    }
}

/// Where a certificate directory stands in a rotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RotationState {
    /// No rotation under way. `cas` are the fingerprints
    /// ([`crate::fingerprint`]) of the CAs `ca.pem` holds (one, normally);
    /// `previous` tells whether a finished rotation's `previous/` is still
    /// there (a new rotation cannot begin until it is deleted).
    Idle {
        /// The CAs of `ca.pem`.
        cas: Vec<String>,
        /// Whether `previous/` exists.
        previous: bool,
    },
    /// [`RotationStep::Begin`] ran: `ca.pem` trusts the old and the new
    /// CA; `pending` certificates are still staged in `next/` for
    /// [`RotationStep::Switch`] (fewer than all when a switch was
    /// interrupted). `trusting` is false when the begin was interrupted
    /// before `ca.pem` became the bundle (run it again).
    Begun {
        /// The old CA's fingerprint.
        old_ca: String,
        /// The new CA's fingerprint.
        new_ca: String,
        /// Certificates staged in `next/`, not yet switched.
        pending: usize,
        /// Whether `ca.pem` is the bundle of both CAs.
        trusting: bool,
    },
    /// [`RotationStep::Switch`] ran: every certificate is the new CA's,
    /// `ca.pem` still trusts both; [`RotationStep::Finish`] is next.
    Switched {
        /// The old CA's fingerprint.
        old_ca: String,
        /// The new CA's fingerprint.
        new_ca: String,
    },
}

/// What a rotation step did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RotationReport {
    /// The step.
    pub step: RotationStep,
    /// The certificate directory.
    pub dir: PathBuf,
    /// The old CA's fingerprint ([`crate::fingerprint`]).
    pub old_ca: String,
    /// The new CA's fingerprint.
    pub new_ca: String,
    /// The identities whose certificates the step made or put in place, in
    /// file-name order.
    pub identities: Vec<PeerIdentity>,
    /// Files the step wrote or replaced, in `dir` and `next/`.
    pub written: Vec<PathBuf>,
    /// Copies of old files the step kept under `previous/`.
    pub kept: Vec<PathBuf>,
    /// Files and directories the step removed.
    pub removed: Vec<PathBuf>,
}

impl RotationReport {
    fn new(step: RotationStep, dir: &Path, old_ca: String, new_ca: String) -> Self {
        RotationReport {
            step,
            dir: dir.to_path_buf(),
            old_ca,
            new_ca,
            identities: Vec::new(),
            written: Vec::new(),
            kept: Vec::new(),
            removed: Vec::new(),
        }
    }
}

/// Runs one rotation step on the certificate directory `dir` (see the
/// module documentation for what each does).
///
/// # Errors
/// [`Error::Rotation`] when the directory is not in the state the step
/// starts from (naming the step that is due); errors naming the file for a
/// certificate that does not load, has no key beside it or is not signed
/// by the CA it should be; I/O and generation errors.
pub fn rotate(dir: &Path, step: RotationStep) -> Result<RotationReport> {
    let report = match step {
        RotationStep::Begin => begin(dir),
        RotationStep::Switch => switch(dir),
        RotationStep::Finish => finish(dir),
        RotationStep::Abort => abort(dir),
    }?;
    tracing::info!(
        dir = %dir.display(),
        step = step.as_str(),
        old_ca = %report.old_ca,
        new_ca = %report.new_ca,
        "CA rotation step done"
    );
    Ok(report)
}

/// Where the certificate directory `dir` stands in a rotation.
///
/// # Errors
/// When `ca.pem`, `next/ca.pem` or `previous/ca.pem` does not load, or a
/// directory cannot be read.
pub fn rotation_state(dir: &Path) -> Result<RotationState> {
    let next = dir.join(NEXT_DIR);
    let previous = dir.join(PREVIOUS_DIR);
    if !next.exists() {
        let cas = load_ca_bundle(&dir.join("ca.pem"))?;
        return Ok(RotationState::Idle {
            cas: cas.iter().map(|c| fingerprint(c)).collect(),
            previous: previous.exists(),
        });
    }
    let old = single_ca(&previous.join("ca.pem"))?;
    let new = next_ca(dir)?;
    let bundle = load_ca_bundle(&dir.join("ca.pem"))?;
    let pending = staged(&next)?.len();
    let (old_ca, new_ca) = (fingerprint(&old), fingerprint(&new));
    if pending == 0 {
        return Ok(RotationState::Switched { old_ca, new_ca });
    }
    Ok(RotationState::Begun {
        old_ca,
        new_ca,
        pending,
        trusting: bundle.contains(&old) && bundle.contains(&new),
    })
}

/// Refuses to sign with the directory's CA while a rotation is under way
/// (`kvctl certs add` would sign with the old CA a certificate that
/// [`RotationStep::Switch`] would not replace).
pub(crate) fn refuse_during_rotation(dir: &Path) -> Result<()> {
    if dir.join(NEXT_DIR).exists() {
        return Err(rotation_error(
            dir,
            "a CA rotation is under way (next/ exists): finish it (kvctl certs rotate switch, \
             then finish) or abort it before adding certificates",
        ));
    }
    Ok(())
}

fn begin(dir: &Path) -> Result<RotationReport> {
    let next = dir.join(NEXT_DIR);
    let previous = dir.join(PREVIOUS_DIR);
    let ca_pem = dir.join("ca.pem");
    if next.exists() {
        // Either a rotation is under way, or a begin was interrupted after
        // staging: then it is finished here.
        let old = single_ca(&previous.join("ca.pem"))?;
        let new = next_ca(dir)?;
        let bundle = load_ca_bundle(&ca_pem)?;
        if bundle.contains(&new) {
            return Err(rotation_error(
                dir,
                "a CA rotation is under way already (next/ exists and ca.pem trusts its CA): \
                 run `kvctl certs rotate switch`, then `finish` (or `abort` before switch)",
            ));
        }
        let mut report = RotationReport::new(
            RotationStep::Begin,
            dir,
            fingerprint(&old),
            fingerprint(&new),
        );
        report.identities = staged(&next)?.into_iter().map(|(_, id)| id).collect();
        trust_both(dir, &mut report)?;
        return Ok(report);
    }
    if previous.exists() {
        return Err(rotation_error(
            dir,
            "previous/ holds what an earlier rotation retired (its CA key included): delete it, \
             or move it away, before beginning another rotation",
        ));
    }
    // ca.pem must hold one CA and ca.key must be its key.
    load_ca(dir)?;
    let old = single_ca(&ca_pem)?;
    let leaves = leaves(dir)?;
    for leaf in &leaves {
        check_trusted(std::slice::from_ref(&old), &leaf.chain).map_err(|e| Error::NotTrusted {
            cert: leaf.cert.clone(),
            ca: ca_pem.clone(),
            reason: format!(
                "{e}; a rotation re-signs every certificate of the directory: move this one out \
                 of it if it is not the cluster's"
            ),
        })?;
    }

    // Stage everything in next.partial/, then rename it: next/ exists
    // complete or not at all.
    let partial = dir.join(NEXT_PARTIAL);
    if partial.exists() {
        fs::remove_dir_all(&partial).map_err(|source| io(&partial, source))?;
    }
    create_dir(&partial)?;
    let ca = new_ca()?;
    let mut identities = Vec::with_capacity(leaves.len());
    for leaf in &leaves {
        let signed = sign_leaf(&ca, leaf.identity.role, &leaf.identity.name)?;
        let name = |ext: &str| partial.join(format!("{}.{ext}", leaf.stem));
        write_file(&name("pem"), &signed.cert_pem, Access::PublicNew)?;
        write_file(&name("key"), &signed.key_pem, Access::PrivateNew)?;
        identities.push(leaf.identity.clone());
    }
    write_file(&partial.join("ca.pem"), &ca.pem(), Access::PublicNew)?;
    write_file(
        &partial.join("ca.key"),
        &ca.key().serialize_pem(),
        Access::PrivateNew,
    )?;
    sync_dir(&partial)?;
    fs::rename(&partial, &next).map_err(|source| io(&next, source))?;
    sync_dir(dir)?;

    let mut report = RotationReport::new(
        RotationStep::Begin,
        dir,
        fingerprint(&old),
        fingerprint(ca.der()),
    );
    report.identities = identities;
    for leaf in &leaves {
        for ext in ["pem", "key"] {
            report
                .written
                .push(next.join(format!("{}.{ext}", leaf.stem)));
        }
    }
    report.written.push(next.join("ca.pem"));
    report.written.push(next.join("ca.key"));
    trust_both(dir, &mut report)?;
    Ok(report)
}

/// The end of [`begin`]: keeps the old CA's files in `previous/`, then
/// makes `ca.pem` the bundle of the old CA and the new one.
fn trust_both(dir: &Path, report: &mut RotationReport) -> Result<()> {
    let previous = dir.join(PREVIOUS_DIR);
    let ca_pem = dir.join("ca.pem");
    create_dir(&previous)?;
    for name in ["ca.pem", "ca.key"] {
        let kept = previous.join(name);
        if !kept.exists() {
            keep_copy(&dir.join(name), &kept)?;
            report.kept.push(kept);
        }
    }
    let old_pem = pem_text(&previous.join("ca.pem"))?;
    let new_pem = pem_text(&dir.join(NEXT_DIR).join("ca.pem"))?;
    replace_file(&ca_pem, &format!("{old_pem}{new_pem}"), Access::Public)?;
    // What was written must load as the bundle it is meant to be.
    let bundle = load_ca_bundle(&ca_pem)?;
    if bundle.len() != 2 {
        return Err(rotation_error(
            dir,
            &format!(
                "ca.pem holds {} CA certificates after the begin step, not 2",
                bundle.len()
            ),
        ));
    }
    report.written.push(ca_pem);
    Ok(())
}

fn switch(dir: &Path) -> Result<RotationReport> {
    let next = dir.join(NEXT_DIR);
    let previous = dir.join(PREVIOUS_DIR);
    let (old, new) = rotation_cas(dir, RotationStep::Switch)?;
    let ca_pem = dir.join("ca.pem");
    let bundle = load_ca_bundle(&ca_pem)?;
    if !(bundle.contains(&old) && bundle.contains(&new)) {
        return Err(rotation_error(
            dir,
            "ca.pem does not trust both the old and the new CA: the begin step did not finish; \
             run `kvctl certs rotate begin` again",
        ));
    }
    let staged = staged(&next)?;
    if staged.is_empty() {
        return Err(rotation_error(
            dir,
            "every certificate was switched already: reload every node and client, then run \
             `kvctl certs rotate finish`",
        ));
    }
    let mut report = RotationReport::new(
        RotationStep::Switch,
        dir,
        fingerprint(&old),
        fingerprint(&new),
    );
    create_dir(&previous)?;
    // Copies of the old files first (each synced), then the renames one
    // right after the other, so that a reader finds a certificate and a key
    // that do not match for as short a moment as can be (`load` reads such
    // a pair again).
    let mut moves = Vec::new();
    for (stem, identity) in staged {
        // The key first, then the certificate; either may be gone already
        // when an earlier switch was interrupted.
        for ext in ["key", "pem"] {
            let name = format!("{stem}.{ext}");
            let (staged_file, live, kept) =
                (next.join(&name), dir.join(&name), previous.join(&name));
            if !staged_file.exists() {
                continue;
            }
            if live.exists() && !kept.exists() {
                keep_copy(&live, &kept)?;
                report.kept.push(kept);
            }
            moves.push((staged_file, live));
        }
        report.identities.push(identity);
    }
    sync_dir(&previous)?;
    for (staged_file, live) in moves {
        fs::rename(&staged_file, &live).map_err(|source| io(&live, source))?;
        report.written.push(live);
    }
    sync_dir(dir)?;
    sync_dir(&next)?;
    Ok(report)
}

fn finish(dir: &Path) -> Result<RotationReport> {
    let next = dir.join(NEXT_DIR);
    let previous = dir.join(PREVIOUS_DIR);
    let (old, new) = rotation_cas(dir, RotationStep::Finish)?;
    let pending = staged(&next)?;
    if !pending.is_empty() {
        return Err(rotation_error(
            dir,
            &format!(
                "{} certificate(s) are still staged in next/: run `kvctl certs rotate switch` \
                 (and reload every node and client) before finish",
                pending.len()
            ),
        ));
    }
    let ca_pem = dir.join("ca.pem");
    let mut report = RotationReport::new(
        RotationStep::Finish,
        dir,
        fingerprint(&old),
        fingerprint(&new),
    );
    for leaf in leaves(dir)? {
        check_trusted(std::slice::from_ref(&new), &leaf.chain).map_err(|e| Error::NotTrusted {
            cert: leaf.cert.clone(),
            ca: next.join("ca.pem"),
            reason: format!(
                "{e}; finish would leave it trusted by no CA: sign it again with \
                 `kvctl certs add` after the rotation, or move it out of the directory"
            ),
        })?;
        report.identities.push(leaf.identity);
    }
    let kept_key = previous.join("ca.key");
    if !kept_key.exists() {
        create_dir(&previous)?;
        keep_copy(&dir.join("ca.key"), &kept_key)?;
        report.kept.push(kept_key);
    }
    // The key first: `certs add` signs with ca.key and checks it against
    // ca.pem, so a pair half replaced is refused, never misused.
    for name in ["ca.key", "ca.pem"] {
        let staged_file = next.join(name);
        if staged_file.exists() {
            let live = dir.join(name);
            fs::rename(&staged_file, &live).map_err(|source| io(&live, source))?;
            report.written.push(live);
        }
    }
    sync_dir(dir)?;
    fs::remove_dir(&next).map_err(|source| io(&next, source))?;
    report.removed.push(next);
    sync_dir(dir)?;
    // The result must be the new CA alone.
    let cas = load_ca_bundle(&ca_pem)?;
    if cas != [new] {
        return Err(rotation_error(
            dir,
            "ca.pem does not hold the new CA alone after finish",
        ));
    }
    Ok(report)
}

fn abort(dir: &Path) -> Result<RotationReport> {
    let next = dir.join(NEXT_DIR);
    let previous = dir.join(PREVIOUS_DIR);
    let (old, new) = rotation_cas(dir, RotationStep::Abort)?;
    let staged_count = staged(&next)?.len();
    let leaves = leaves(dir)?;
    let switched: Vec<&Path> = leaves
        .iter()
        .filter(|leaf| check_trusted(std::slice::from_ref(&old), &leaf.chain).is_err())
        .map(|leaf| leaf.cert.as_path())
        .collect();
    if !switched.is_empty() || staged_count < leaves.len() {
        return Err(rotation_error(
            dir,
            "certificates of the new CA are in place already (switch ran): abort undoes only \
             the begin step; run `kvctl certs rotate finish` instead",
        ));
    }
    let mut report = RotationReport::new(
        RotationStep::Abort,
        dir,
        fingerprint(&old),
        fingerprint(&new),
    );
    let ca_pem = dir.join("ca.pem");
    replace_file(
        &ca_pem,
        &pem_text(&previous.join("ca.pem"))?,
        Access::Public,
    )?;
    report.written.push(ca_pem);
    for gone in [next, previous] {
        fs::remove_dir_all(&gone).map_err(|source| io(&gone, source))?;
        report.removed.push(gone);
    }
    sync_dir(dir)?;
    Ok(report)
}

/// The old CA (`previous/ca.pem`) and the new one (`next/ca.pem`) of the
/// rotation under way in `dir`, for `step`.
fn rotation_cas(
    dir: &Path,
    step: RotationStep,
) -> Result<(CertificateDer<'static>, CertificateDer<'static>)> {
    if !dir.join(NEXT_DIR).exists() {
        return Err(rotation_error(
            dir,
            &format!(
                "no CA rotation is under way (no next/): `kvctl certs rotate {}` follows \
                 `kvctl certs rotate begin`",
                step.as_str()
            ),
        ));
    }
    let old = single_ca(&dir.join(PREVIOUS_DIR).join("ca.pem"))?;
    let new = next_ca(dir)?;
    Ok((old, new))
}

/// The new CA: `next/ca.pem`, or `ca.pem` itself once finish moved it (an
/// interrupted finish).
fn next_ca(dir: &Path) -> Result<CertificateDer<'static>> {
    let staged_ca = dir.join(NEXT_DIR).join("ca.pem");
    if staged_ca.exists() {
        return single_ca(&staged_ca);
    }
    single_ca(&dir.join("ca.pem"))
}

/// The one CA certificate of a file that must hold exactly one.
fn single_ca(path: &Path) -> Result<CertificateDer<'static>> {
    let mut cas = load_ca_bundle(path)?;
    match (cas.pop(), cas.is_empty()) {
        (Some(ca), true) => Ok(ca),
        _ => Err(Error::BadFile {
            path: path.to_path_buf(),
            reason: format!("expected one CA certificate, found {}", cas.len() + 1),
        }),
    }
}

/// A certificate and key pair of a certificate directory.
struct LeafFile {
    /// The file stem (`node1` for `node1.pem` and `node1.key`).
    stem: String,
    /// `<stem>.pem`.
    cert: PathBuf,
    /// The certificate chain, leaf first.
    chain: Vec<CertificateDer<'static>>,
    /// What the certificate says it is.
    identity: PeerIdentity,
}

/// Every `<stem>.pem` of `dir` but `ca.pem`, each with `<stem>.key`
/// beside it and an identity, in stem order.
fn leaves(dir: &Path) -> Result<Vec<LeafFile>> {
    let mut out = Vec::new();
    for stem in pem_stems(dir)? {
        let cert = dir.join(format!("{stem}.pem"));
        let key = dir.join(format!("{stem}.key"));
        if !key.is_file() {
            return Err(Error::BadFile {
                path: cert,
                reason: format!(
                    "no private key {stem}.key beside it: a rotation re-signs every certificate \
                     of the directory, each with its key; move this file out of it if it is not \
                     one of the cluster's"
                ),
            });
        }
        let chain = read_certs(&cert)?;
        let identity = identity_of(&cert, &chain)?;
        out.push(LeafFile {
            stem,
            cert,
            chain,
            identity,
        });
    }
    Ok(out)
}

/// The certificates staged in `next` (stems whose `.pem` or `.key` is
/// still there), with their identities, in stem order.
fn staged(next: &Path) -> Result<Vec<(String, PeerIdentity)>> {
    let mut stems = pem_stems(next)?;
    for stem in key_stems(next)? {
        if !stems.contains(&stem) {
            stems.push(stem);
        }
    }
    stems.sort();
    let mut out = Vec::with_capacity(stems.len());
    for stem in stems {
        let cert = next.join(format!("{stem}.pem"));
        // A switch interrupted between a key and its certificate leaves
        // only the certificate, or only the key: the identity is then read
        // from the certificate already in place.
        let source = if cert.exists() {
            cert
        } else {
            next.parent()
                .map_or_else(|| cert.clone(), |dir| dir.join(format!("{stem}.pem")))
        };
        let chain = read_certs(&source)?;
        out.push((stem, identity_of(&source, &chain)?));
    }
    Ok(out)
}

/// The identity the leaf of `chain` (read from `path`) carries.
fn identity_of(path: &Path, chain: &[CertificateDer<'static>]) -> Result<PeerIdentity> {
    let bad = |reason: String| Error::BadFile {
        path: path.to_path_buf(),
        reason,
    };
    let leaf = chain
        .first()
        .ok_or_else(|| bad("no CERTIFICATE block found".into()))?;
    peer_identity(leaf).map_err(|e| bad(e.to_string()))
}

/// Stems of the `<stem>.pem` files of `dir` but `ca`, sorted.
fn pem_stems(dir: &Path) -> Result<Vec<String>> {
    stems_with(dir, ".pem")
}

/// Stems of the `<stem>.key` files of `dir` but `ca`, sorted.
fn key_stems(dir: &Path) -> Result<Vec<String>> {
    stems_with(dir, ".key")
}

/// Stems of the regular files (or links to them) of `dir` named
/// `<stem><suffix>`, but `ca`; at most [`MAX_DIR_ENTRIES`] entries are read.
fn stems_with(dir: &Path, suffix: &str) -> Result<Vec<String>> {
    let entries = fs::read_dir(dir).map_err(|source| io(dir, source))?;
    let mut stems = Vec::new();
    for (count, entry) in entries.enumerate() {
        if count >= MAX_DIR_ENTRIES {
            return Err(rotation_error(
                dir,
                &format!("holds more than {MAX_DIR_ENTRIES} entries; not a certificate directory"),
            ));
        }
        let entry = entry.map_err(|source| io(dir, source))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let Some(stem) = name.strip_suffix(suffix) else {
            continue;
        };
        if stem.is_empty() || stem == "ca" || stem.starts_with('.') {
            continue;
        }
        if fs::metadata(entry.path()).is_ok_and(|m| m.is_file()) {
            stems.push(stem.to_owned());
        }
    }
    stems.sort();
    Ok(stems)
}

/// The text of a PEM file (bounded), ending with a newline.
fn pem_text(path: &Path) -> Result<String> {
    let mut text = String::from_utf8(read_bounded(path)?).map_err(|_| Error::BadFile {
        path: path.to_path_buf(),
        reason: "not a PEM file (not UTF-8)".into(),
    })?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// Replaces `path` with `contents` atomically: written to
/// `<path>.partial`, synced, renamed over it.
fn replace_file(path: &Path, contents: &str, access: Access) -> Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    write_file(&partial, contents, access)?;
    fs::rename(&partial, path).map_err(|source| io(path, source))?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Copies `from` to `to` (which must not exist) with `from`'s permissions,
/// and syncs it.
fn keep_copy(from: &Path, to: &Path) -> Result<()> {
    let bytes = read_bounded(from)?;
    let text = String::from_utf8(bytes).map_err(|_| Error::BadFile {
        path: from.to_path_buf(),
        reason: "not a PEM file (not UTF-8)".into(),
    })?;
    let private = from.extension().is_some_and(|e| e == "key");
    let access = if private {
        Access::PrivateNew
    } else {
        Access::PublicNew
    };
    write_file(to, &text, access)
}

/// Makes the renames and creations in `dir` durable.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| io(dir, source))
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn rotation_error(dir: &Path, reason: &str) -> Error {
    Error::Rotation {
        dir: dir.to_path_buf(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use kv_types::NodeId;

    use super::*;
    use crate::{Role, TlsFiles, load};

    fn ids(names: &[&str]) -> Vec<NodeId> {
        names.iter().map(|n| NodeId::new(*n).unwrap()).collect()
    }

    /// A certificate directory as `kvctl certs init` writes it.
    fn cluster() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        crate::init(dir.path(), &ids(&["node1", "node2"])).unwrap();
        dir
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn ca_of(dir: &Path, name: &str) -> String {
        fingerprint(load(&TlsFiles::in_dir(dir, name)).unwrap().ca())
    }

    /// `name`'s certificate from `certs` checked against the CA file `ca`.
    fn load_under(ca: &Path, certs: &Path, name: &str) -> Result<crate::Credentials> {
        let mut files = TlsFiles::in_dir(certs, name);
        files.ca = ca.to_path_buf();
        load(&files)
    }

    const STEMS: [&str; 4] = ["admin", "client", "node1", "node2"];

    #[test]
    fn a_rotation_moves_every_identity_to_a_new_ca_in_three_steps() {
        let tmp = cluster();
        let dir = tmp.path();
        let old_ca = ca_of(dir, "node1");
        let original_ca_pem = fs::read(dir.join("ca.pem")).unwrap();

        // Begin: new CA and certificates staged, ca.pem trusts both.
        let begun = rotate(dir, RotationStep::Begin).unwrap();
        assert_eq!(begun.old_ca, old_ca);
        assert_ne!(begun.new_ca, old_ca);
        let names: Vec<(Role, &str)> = begun
            .identities
            .iter()
            .map(|i| (i.role, i.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                (Role::Admin, "admin"),
                (Role::Client, "client"),
                (Role::Node, "node1"),
                (Role::Node, "node2")
            ]
        );
        let next = dir.join(NEXT_DIR);
        let previous = dir.join(PREVIOUS_DIR);
        assert_eq!(load_ca_bundle(&dir.join("ca.pem")).unwrap().len(), 2);
        assert_eq!(fs::read(previous.join("ca.pem")).unwrap(), original_ca_pem);
        assert_eq!(mode(&previous.join("ca.key")), 0o600);
        assert_eq!(mode(&next), 0o700);
        for stem in STEMS {
            assert_eq!(mode(&next.join(format!("{stem}.key"))), 0o600, "{stem}");
            // The old certificate still loads (now under the bundle), and
            // so does the staged one, from the new CA.
            assert_eq!(ca_of(dir, stem), old_ca, "{stem}");
            let staged = load_under(&dir.join("ca.pem"), &next, stem).unwrap();
            assert_eq!(fingerprint(staged.ca()), begun.new_ca, "{stem}");
            assert_eq!(staged.identity().name, stem);
        }
        assert_eq!(
            rotation_state(dir).unwrap(),
            RotationState::Begun {
                old_ca: old_ca.clone(),
                new_ca: begun.new_ca.clone(),
                pending: 4,
                trusting: true
            }
        );

        // Switch: the new certificates are in place, the old ones kept.
        let old_node1 = fs::read(dir.join("node1.pem")).unwrap();
        let switched = rotate(dir, RotationStep::Switch).unwrap();
        assert_eq!(switched.identities.len(), 4);
        assert_eq!(fs::read(previous.join("node1.pem")).unwrap(), old_node1);
        for stem in STEMS {
            assert_eq!(ca_of(dir, stem), begun.new_ca, "{stem}");
            assert_eq!(mode(&dir.join(format!("{stem}.key"))), 0o600, "{stem}");
            assert_eq!(mode(&previous.join(format!("{stem}.key"))), 0o600, "{stem}");
        }
        assert_eq!(
            rotation_state(dir).unwrap(),
            RotationState::Switched {
                old_ca: old_ca.clone(),
                new_ca: begun.new_ca.clone()
            }
        );

        // Finish: the new CA alone; the old certificates are trusted no more.
        let finished = rotate(dir, RotationStep::Finish).unwrap();
        assert_eq!(finished.removed, std::slice::from_ref(&next));
        assert!(!next.exists());
        let cas = load_ca_bundle(&dir.join("ca.pem")).unwrap();
        assert_eq!(cas.len(), 1);
        assert_eq!(fingerprint(&cas[0]), begun.new_ca);
        let err = load_under(&dir.join("ca.pem"), &previous, "node1").unwrap_err();
        assert!(matches!(err, Error::NotTrusted { .. }), "{err}");
        assert_eq!(
            rotation_state(dir).unwrap(),
            RotationState::Idle {
                cas: vec![begun.new_ca.clone()],
                previous: true
            }
        );
        // The new CA signs new nodes (ca.key is its key now).
        crate::add_node(dir, &NodeId::new("node3").unwrap()).unwrap();
        assert_eq!(ca_of(dir, "node3"), begun.new_ca);

        // Another rotation waits until previous/ is dealt with.
        let err = rotate(dir, RotationStep::Begin).unwrap_err();
        assert!(err.to_string().contains("previous/"), "{err}");
        fs::remove_dir_all(&previous).unwrap();
        let again = rotate(dir, RotationStep::Begin).unwrap();
        assert_eq!(again.old_ca, begun.new_ca);
        assert_eq!(again.identities.len(), 5);
    }

    #[test]
    fn steps_out_of_order_are_refused_and_say_what_is_due() {
        let tmp = cluster();
        let dir = tmp.path();
        for step in [
            RotationStep::Switch,
            RotationStep::Finish,
            RotationStep::Abort,
        ] {
            let err = rotate(dir, step).unwrap_err();
            assert!(matches!(err, Error::Rotation { .. }), "{err}");
            assert!(err.to_string().contains("rotate begin"), "{err}");
        }
        rotate(dir, RotationStep::Begin).unwrap();
        let err = rotate(dir, RotationStep::Begin).unwrap_err();
        assert!(err.to_string().contains("under way already"), "{err}");
        let err = rotate(dir, RotationStep::Finish).unwrap_err();
        assert!(err.to_string().contains("rotate switch"), "{err}");
        // Signing with the old CA mid-rotation is refused.
        let err = crate::add_node(dir, &NodeId::new("node3").unwrap()).unwrap_err();
        assert!(err.to_string().contains("rotation is under way"), "{err}");
        assert!(!dir.join("node3.pem").exists());
        rotate(dir, RotationStep::Switch).unwrap();
        let err = rotate(dir, RotationStep::Switch).unwrap_err();
        assert!(err.to_string().contains("rotate finish"), "{err}");
        let err = rotate(dir, RotationStep::Abort).unwrap_err();
        assert!(err.to_string().contains("rotate finish"), "{err}");
        rotate(dir, RotationStep::Finish).unwrap();
    }

    #[test]
    fn abort_before_switch_restores_the_old_ca() {
        let tmp = cluster();
        let dir = tmp.path();
        let original = fs::read(dir.join("ca.pem")).unwrap();
        let old_ca = ca_of(dir, "node1");
        rotate(dir, RotationStep::Begin).unwrap();
        let aborted = rotate(dir, RotationStep::Abort).unwrap();
        assert_eq!(aborted.old_ca, old_ca);
        assert_eq!(fs::read(dir.join("ca.pem")).unwrap(), original);
        assert!(!dir.join(NEXT_DIR).exists() && !dir.join(PREVIOUS_DIR).exists());
        assert_eq!(
            rotation_state(dir).unwrap(),
            RotationState::Idle {
                cas: vec![old_ca],
                previous: false
            }
        );
        // And a rotation can begin again at once.
        rotate(dir, RotationStep::Begin).unwrap();
    }

    #[test]
    fn an_interrupted_step_finishes_when_run_again() {
        let tmp = cluster();
        let dir = tmp.path();
        let next = dir.join(NEXT_DIR);
        let begun = rotate(dir, RotationStep::Begin).unwrap();
        // A switch that stopped after node1's key: its certificate is
        // still staged, the pair in place is mismatched.
        fs::rename(next.join("node1.key"), dir.join("node1.key")).unwrap();
        let err = load(&TlsFiles::in_dir(dir, "node1")).unwrap_err();
        assert!(matches!(err, Error::KeyMismatch { .. }), "{err}");
        assert!(matches!(
            rotation_state(dir).unwrap(),
            RotationState::Begun { pending: 4, .. }
        ));
        rotate(dir, RotationStep::Switch).unwrap();
        for stem in STEMS {
            assert_eq!(ca_of(dir, stem), begun.new_ca, "{stem}");
        }
        // A finish that stopped after ca.key.
        fs::rename(next.join("ca.key"), dir.join("ca.key")).unwrap();
        rotate(dir, RotationStep::Finish).unwrap();
        assert_eq!(
            load_ca_bundle(&dir.join("ca.pem"))
                .unwrap()
                .iter()
                .map(|c| fingerprint(c))
                .collect::<Vec<_>>(),
            [begun.new_ca]
        );
        crate::add_node(dir, &NodeId::new("node3").unwrap()).unwrap();
    }

    #[test]
    fn files_that_are_not_the_clusters_stop_a_rotation_before_it_begins() {
        let tmp = cluster();
        let dir = tmp.path();
        // A certificate without its key.
        fs::copy(dir.join("node1.pem"), dir.join("stray.pem")).unwrap();
        let err = rotate(dir, RotationStep::Begin).unwrap_err();
        assert!(err.to_string().contains("stray.pem"), "{err}");
        assert!(
            err.to_string().contains("no private key stray.key"),
            "{err}"
        );
        fs::remove_file(dir.join("stray.pem")).unwrap();
        // Another CA's certificate with its key.
        let other = cluster();
        for ext in ["pem", "key"] {
            fs::copy(
                other.path().join(format!("node1.{ext}")),
                dir.join(format!("foreign.{ext}")),
            )
            .unwrap();
        }
        let err = rotate(dir, RotationStep::Begin).unwrap_err();
        assert!(matches!(err, Error::NotTrusted { .. }), "{err}");
        assert!(err.to_string().contains("foreign.pem"), "{err}");
        // Nothing was touched.
        assert!(!dir.join(NEXT_DIR).exists() && !dir.join(PREVIOUS_DIR).exists());
        assert_eq!(load_ca_bundle(&dir.join("ca.pem")).unwrap().len(), 1);
    }
}
