//! The value syntaxes of `EBB_*` variables. Every reader of a variable parses it with
//! one of these, and `environment.rs` checks a value with the same one, so a value the
//! check lets pass is one its reader takes. Byte slices only: nothing here allocates.

/// Parse a decimal number (surrounding spaces allowed).
pub fn parse_u64(text: &[u8]) -> Option<u64> {
    let text = trim(text);
    if text.is_empty() {
        return None;
    }
    let mut value: u64 = 0;
    for &c in text {
        if !c.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(value)
}

/// Parse `1/0`, `true/false`, `yes/no`, `on/off` (any case).
pub fn parse_bool(text: &[u8]) -> Option<bool> {
    let text = trim(text);
    let mut lower = [0u8; 8];
    if text.len() > lower.len() {
        return None;
    }
    for (d, s) in lower.iter_mut().zip(text) {
        *d = s.to_ascii_lowercase();
    }
    match &lower[..text.len()] {
        b"1" | b"true" | b"yes" | b"on" => Some(true),
        b"0" | b"false" | b"no" | b"off" => Some(false),
        _ => None,
    }
}

/// Parse a duration in milliseconds: digits with `ms`, `s`, `m` or `h`, bare digits
/// being milliseconds (`EBB_PURGE_DELAY`, `EBB_PROFILE_INTERVAL`). Zero parses; a
/// reader that cannot take it filters it out.
pub fn parse_duration_ms(text: &[u8]) -> Option<u64> {
    let text = trim(text);
    let split = text
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let scale = match unit {
        b"" | b"ms" => 1,
        b"s" => 1000,
        b"m" => 60 * 1000,
        b"h" => 60 * 60 * 1000,
        _ => return None,
    };
    parse_u64(digits).map(|v| v.saturating_mul(scale))
}

/// Parse a byte count above zero, with an optional `k`, `m` or `g` (any case, powers of
/// 1024): `EBB_PROFILE_RATE`.
pub fn parse_bytes(text: &[u8]) -> Option<u64> {
    let text = trim(text);
    let (digits, scale) = match text.last().map(|b| b.to_ascii_lowercase()) {
        Some(b'k') => (&text[..text.len() - 1], 1u64 << 10),
        Some(b'm') => (&text[..text.len() - 1], 1 << 20),
        Some(b'g') => (&text[..text.len() - 1], 1 << 30),
        _ => (text, 1),
    };
    parse_u64(digits)
        .map(|v| v.saturating_mul(scale))
        .filter(|&v| v > 0)
}

/// Parse `EBB_SECURE`: `light` (or `1`) is 1, `full` (or `2`) is 2, any case.
pub fn parse_secure_level(text: &[u8]) -> Option<u8> {
    let text = trim(text);
    if text.eq_ignore_ascii_case(b"light") || text == b"1" {
        Some(1)
    } else if text.eq_ignore_ascii_case(b"full") || text == b"2" {
        Some(2)
    } else {
        None
    }
}

/// `text` without leading and trailing ASCII white space.
pub fn trim(mut text: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = text {
        if first.is_ascii_whitespace() {
            text = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = text {
        if last.is_ascii_whitespace() {
            text = rest;
        } else {
            break;
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_numbers_and_bools() {
        assert_eq!(parse_u64(b"250"), Some(250));
        assert_eq!(parse_u64(b" 7 "), Some(7));
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"99999999999999999999999"), None);
        assert_eq!(parse_bool(b"1"), Some(true));
        assert_eq!(parse_bool(b"Yes"), Some(true));
        assert_eq!(parse_bool(b"off"), Some(false));
        assert_eq!(parse_bool(b"maybe"), None);
    }

    #[test]
    fn durations_read_with_units_bare_digits_as_milliseconds() {
        assert_eq!(parse_duration_ms(b"250"), Some(250));
        assert_eq!(parse_duration_ms(b"250ms"), Some(250));
        assert_eq!(parse_duration_ms(b" 10s "), Some(10_000));
        assert_eq!(parse_duration_ms(b"5m"), Some(300_000));
        assert_eq!(parse_duration_ms(b"1h"), Some(3_600_000));
        assert_eq!(parse_duration_ms(b"0"), Some(0));
        assert_eq!(parse_duration_ms(b"0s"), Some(0));
        for bad in [&b""[..], b"s", b"10 s", b"1.5s", b"10sec", b"-1s", b"2S"] {
            assert_eq!(
                parse_duration_ms(bad),
                None,
                "{:?}",
                core::str::from_utf8(bad)
            );
        }
    }

    #[test]
    fn bytes_read_with_binary_suffixes() {
        assert_eq!(parse_bytes(b"4096"), Some(4096));
        assert_eq!(parse_bytes(b"512k"), Some(512 << 10));
        assert_eq!(parse_bytes(b" 4M "), Some(4 << 20));
        assert_eq!(parse_bytes(b"1g"), Some(1 << 30));
        for bad in [&b""[..], b"0", b"0k", b"k", b"1.5m", b"4 MiB", b"-1"] {
            assert_eq!(parse_bytes(bad), None, "{:?}", core::str::from_utf8(bad));
        }
    }
}
