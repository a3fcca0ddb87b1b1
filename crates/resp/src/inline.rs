//! Inline commands: one line of space-separated words, as a person types
//! into `telnet` or `nc`, with Redis's quoting rules.

/// Splits an inline command line into words, honouring double quotes (with
/// backslash escapes `\n \r \t \" \\ \xHH`) and single quotes (`\'` only),
/// as `redis-cli` and Redis's `sdssplitargs` do. `None` on unbalanced
/// quotes or a closing quote not followed by a space.
pub fn split_words(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut words = Vec::new();
    let mut i = 0;
    while i < line.len() {
        if line[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let mut word = Vec::new();
        match line[i] {
            b'"' => {
                i += 1;
                loop {
                    match *line.get(i)? {
                        b'\\'
                            if i + 3 < line.len()
                                && line[i + 1] == b'x'
                                && line[i + 2].is_ascii_hexdigit()
                                && line[i + 3].is_ascii_hexdigit() =>
                        {
                            let hex = std::str::from_utf8(&line[i + 2..i + 4]).ok()?;
                            word.push(u8::from_str_radix(hex, 16).ok()?);
                            i += 4;
                        }
                        b'\\' if i + 1 < line.len() => {
                            word.push(match line[i + 1] {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'b' => 0x08,
                                b'a' => 0x07,
                                other => other,
                            });
                            i += 2;
                        }
                        b'"' => {
                            i += 1;
                            break;
                        }
                        other => {
                            word.push(other);
                            i += 1;
                        }
                    }
                }
            }
            b'\'' => {
                i += 1;
                loop {
                    match *line.get(i)? {
                        b'\\' if line.get(i + 1) == Some(&b'\'') => {
                            word.push(b'\'');
                            i += 2;
                        }
                        b'\'' => {
                            i += 1;
                            break;
                        }
                        other => {
                            word.push(other);
                            i += 1;
                        }
                    }
                }
            }
            _ => {
                while i < line.len() && !line[i].is_ascii_whitespace() {
                    word.push(line[i]);
                    i += 1;
                }
                words.push(word);
                continue;
            }
        }
        // A closing quote must end the word.
        if i < line.len() && !line[i].is_ascii_whitespace() {
            return None;
        }
        words.push(word);
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Option<Vec<String>> {
        split_words(line.as_bytes()).map(|ws| {
            ws.into_iter()
                .map(|w| String::from_utf8_lossy(&w).into_owned())
                .collect()
        })
    }

    #[test]
    fn quotes_and_escapes() {
        assert_eq!(
            words("set k v"),
            Some(vec!["set".into(), "k".into(), "v".into()])
        );
        assert_eq!(
            words(r#"set "a b" "\x41\n" 'it\'s'"#),
            Some(vec![
                "set".into(),
                "a b".into(),
                "A\n".into(),
                "it's".into()
            ])
        );
        assert_eq!(words("  "), Some(vec![]));
        assert_eq!(words(r#"get "open"#), None);
        assert_eq!(words(r#"get "a"b"#), None);
    }
}
