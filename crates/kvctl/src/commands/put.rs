//! `kvctl put KEY VALUE [--context CTX] [--w N]`.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;

use anyhow::{Context, Result};
use kv_client::{Client, decode_context};
use kv_types::limits::MAX_VALUE_BYTES;

use crate::cli::PutArgs;
use crate::exit::Outcome;
use crate::output;

/// Writes the value, superseding what `--context` saw.
pub async fn run(client: &Client, args: &PutArgs, json: bool) -> Result<Outcome> {
    let context = match &args.context {
        Some(text) => decode_context(text)?,
        None => Vec::new(),
    };
    let value = value(&args.value)?;
    let new_context = client
        .put(args.key.as_bytes(), &value, &context, args.w)
        .await?;
    if json {
        output::print_json(&output::written_json(&args.key, &new_context))?;
    } else {
        output::print("OK\n")?;
    }
    Ok(Outcome::Done)
}

/// The value argument as bytes; `-` reads standard input, at most
/// [`MAX_VALUE_BYTES`] bytes.
fn value(arg: &OsStr) -> Result<Vec<u8>> {
    if arg != "-" {
        return Ok(arg.as_bytes().to_vec());
    }
    read_bounded(std::io::stdin().lock())
}

/// Reads all of `input`, refusing more than [`MAX_VALUE_BYTES`] bytes
/// without reading further.
fn read_bounded(input: impl Read) -> Result<Vec<u8>> {
    let mut value = Vec::new();
    input
        .take(MAX_VALUE_BYTES as u64 + 1)
        .read_to_end(&mut value)
        .context("cannot read the value from standard input")?;
    if value.len() > MAX_VALUE_BYTES {
        return Err(kv_client::Error::Invalid {
            message: format!(
                "the value on standard input exceeds the limit of {MAX_VALUE_BYTES} bytes"
            ),
        }
        .into());
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdin_values_are_bounded() {
        let ok = vec![7u8; MAX_VALUE_BYTES];
        assert_eq!(read_bounded(&ok[..]).unwrap().len(), MAX_VALUE_BYTES);
        let big = vec![7u8; MAX_VALUE_BYTES + 10];
        let e = read_bounded(&big[..]).unwrap_err();
        assert_eq!(crate::exit::code_of(&e), crate::exit::USAGE);
    }

    #[test]
    fn arguments_are_taken_as_bytes() {
        assert_eq!(value(OsStr::new("héllo")).unwrap(), "héllo".as_bytes());
    }
}
