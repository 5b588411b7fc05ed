//! JSON text exactly as Kafka Connect's JsonConverter writes it (Jackson's defaults):
//! compact, fields in insertion order, `"`/`\` and control characters escaped (`\b \t \n
//! \f \r`, others as `\u00XX` in upper-case hex), non-ASCII written as UTF-8 except
//! characters outside the Basic Multilingual Plane (emoji), which Jackson's byte generator
//! (`UTF8JsonGenerator`, what `JsonConverter` writes with) escapes as their two UTF-16
//! surrogates (`\uD83D\uDE80`), doubles in Java's `Double.toString` layout (`1.0`,
//! `1.0E10`). Text Jackson writes to a `String` (`writeValueAsString`, e.g. Debezium's hstore
//! JSON) keeps those characters as they are: [`write_string_as_text`].

/// Appends `text` as a JSON string literal, quotes included, as JsonConverter writes it.
pub fn write_string(out: &mut Vec<u8>, text: &str) {
    write_escaped(out, text, true);
}

/// Appends `text` as a JSON string literal as Jackson writes it to a `String`
/// (`ObjectMapper.writeValueAsString`): characters outside the BMP as they are.
pub fn write_string_as_text(out: &mut Vec<u8>, text: &str) {
    write_escaped(out, text, false);
}

/// Whether any of the eight bytes of `word` may need an escape: a control character, a
/// quote, a backslash, or (with `escape_astral`) the lead byte of a 4-byte UTF-8 sequence. Never false
/// for a word that holds one (the byte-wise tests of "Bit Twiddling Hacks": a byte less than
/// 0x20, a byte equal to one given, as one test each over the whole word).
fn may_need_escape(word: u64, escape_astral: bool) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS != 0;
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS != 0;
    let astral = escape_astral && zero_byte((word & (ONES * 0xF0)) ^ (ONES * 0xF0));
    control
        || zero_byte(word ^ (ONES * u64::from(b'"')))
        || zero_byte(word ^ (ONES * u64::from(b'\\')))
        || astral
}

/// Where the run of bytes from `from` that needs no escape ends, to the last whole block of
/// 16: the first block holding a control character, a quote, a backslash or (with
/// `escape_astral`) a byte of 0xF0 or more is where it stops (SSE2, which every x86-64 CPU
/// has: four comparisons and a mask per block).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn clean_run(bytes: &[u8], from: usize, escape_astral: bool) -> usize {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    let mut i = from;
    // SAFETY: SSE2 is part of x86-64, and every load reads 16 bytes inside `bytes`
    // (`i + 16 <= bytes.len()`), unaligned loads allowed.
    unsafe {
        let last_control = _mm_set1_epi8(0x1F);
        let quote = _mm_set1_epi8(b'"' as i8);
        let backslash = _mm_set1_epi8(b'\\' as i8);
        let astral = _mm_set1_epi8(0xF0u8 as i8);
        while i + 16 <= bytes.len() {
            let v = _mm_loadu_si128(bytes.as_ptr().add(i).cast::<__m128i>());
            // Unsigned: v <= 0x1F exactly when max(v, 0x1F) == 0x1F.
            let control = _mm_cmpeq_epi8(_mm_max_epu8(v, last_control), last_control);
            let mut hits = _mm_or_si128(
                control,
                _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
            );
            if escape_astral {
                // v >= 0xF0 exactly when max(v, 0xF0) == v.
                hits = _mm_or_si128(hits, _mm_cmpeq_epi8(_mm_max_epu8(v, astral), v));
            }
            let mask = _mm_movemask_epi8(hits);
            if mask != 0 {
                return i + mask.trailing_zeros() as usize;
            }
            i += 16;
        }
    }
    i
}

/// Elsewhere the word-at-a-time scan does it all.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn clean_run(_bytes: &[u8], from: usize, _escape_astral: bool) -> usize {
    from
}

fn write_escaped(out: &mut Vec<u8>, text: &str, escape_astral: bool) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let unicode_escape = |out: &mut Vec<u8>, unit: u32| {
        out.extend_from_slice(b"\\u");
        for shift in [12, 8, 4, 0] {
            out.push(HEX[((unit >> shift) & 0xF) as usize]);
        }
    };
    out.reserve(text.len() + 2);
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Runs that need no escape, 16 bytes at a time where the CPU compares them so, then a
        // word at a time (payloads are mostly such runs).
        i = clean_run(bytes, i, escape_astral);
        while let Some(word) = bytes.get(i..i + 8) {
            let word = u64::from_le_bytes(word.try_into().expect("eight bytes"));
            if may_need_escape(word, escape_astral) {
                break;
            }
            i += 8;
        }
        let Some(&b) = bytes.get(i) else {
            break;
        };
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            0x0C => b"\\f",
            b'\r' => b"\\r",
            0..=0x1F => &[],
            // The lead byte of a 4-byte sequence: a character outside the BMP.
            0xF0..=0xF4 if escape_astral => {
                out.extend_from_slice(&bytes[start..i]);
                let c = text[i..].chars().next().expect("a character starts here");
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    unicode_escape(out, u32::from(*unit));
                }
                i += c.len_utf8();
                start = i;
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            unicode_escape(out, u32::from(b));
        } else {
            out.extend_from_slice(escape);
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Appends `value` the way Java's `Double.toString` prints it: shortest round-trip digits,
/// plain notation for 1e-3 <= |v| < 1e7 (always with a fraction, `2.0`), otherwise
/// `d.dddE±n`. NaN and infinities are written as Jackson writes them (quoted names are not
/// valid JSON numbers; Jackson emits them bare), which JSON payloads cannot contain anyway.
pub fn write_double(out: &mut Vec<u8>, value: f64) {
    if value.is_nan() {
        out.extend_from_slice(b"NaN");
        return;
    }
    if value.is_infinite() {
        out.extend_from_slice(if value > 0.0 {
            b"Infinity"
        } else {
            b"-Infinity"
        });
        return;
    }
    if value == 0.0 {
        out.extend_from_slice(if value.is_sign_negative() {
            b"-0.0"
        } else {
            b"0.0"
        });
        return;
    }
    // `{:e}` gives the shortest round-trip digits, e.g. "4.25e1" or "-1e-4".
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} has an exponent");
    let exponent: i32 = exponent.parse().expect("{:e} exponent is an integer");
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if negative {
        out.push(b'-');
    }
    if (-3..7).contains(&exponent) {
        if exponent >= 0 {
            let point = exponent as usize + 1;
            let padded = format!("{digits:0<point$}");
            let (int, frac) = padded.split_at(point);
            out.extend_from_slice(int.as_bytes());
            out.push(b'.');
            out.extend_from_slice(if frac.is_empty() { "0" } else { frac }.as_bytes());
        } else {
            out.extend_from_slice(b"0.");
            for _ in 0..(-exponent - 1) {
                out.push(b'0');
            }
            out.extend_from_slice(digits.as_bytes());
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.extend_from_slice(first.as_bytes());
        out.push(b'.');
        out.extend_from_slice(if rest.is_empty() { "0" } else { rest }.as_bytes());
        out.extend_from_slice(format!("E{exponent}").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(text: &str) -> String {
        let mut out = Vec::new();
        write_string(&mut out, text);
        String::from_utf8(out).unwrap()
    }

    fn double(v: f64) -> String {
        let mut out = Vec::new();
        write_double(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_are_escaped_like_jackson() {
        assert_eq!(string(r#"{"id": 1}"#), r#""{\"id\": 1}""#);
        assert_eq!(string("a\\b"), r#""a\\b""#);
        assert_eq!(string("\n\t\r\u{8}\u{c}"), r#""\n\t\r\b\f""#);
        assert_eq!(string("\u{1}\u{1f}"), r#""\u0001\u001F""#);
        assert_eq!(string("Größe €/ü"), "\"Größe €/ü\"");
        // Jackson's UTF8JsonGenerator: outside the BMP, the UTF-16 surrogates escaped (what
        // Debezium 3.6 + Kafka Connect 4.3 wrote in the differential test).
        assert_eq!(
            string("emoji 🚀🎉!"),
            r#""emoji \uD83D\uDE80\uD83C\uDF89!""#
        );
        let mut text = Vec::new();
        write_string_as_text(&mut text, "🚀\n");
        assert_eq!(String::from_utf8(text).unwrap(), "\"🚀\\n\"");
    }

    /// The escape a character by character writer makes, for comparison with the word-wise
    /// skipping of `write_escaped`.
    fn escaped_char_by_char(text: &str, escape_astral: bool) -> String {
        let mut out = String::from("\"");
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\u{c}' => out.push_str("\\f"),
                '\r' => out.push_str("\\r"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
                c if escape_astral && (c as u32) > 0xFFFF => {
                    for unit in c.encode_utf16(&mut [0; 2]) {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    #[test]
    fn every_character_that_needs_an_escape_is_found_at_every_place_in_a_word() {
        let special = [
            '"',
            '\\',
            '\u{0}',
            '\u{8}',
            '\t',
            '\n',
            '\u{c}',
            '\r',
            '\u{1f}',
            '🚀',
            '\u{10FFFF}',
        ];
        // Characters next to the special ones in value (0x20, 0x21, 0x23, 0x5B, 0x5D, DEL,
        // 2- and 3-byte sequences, the last of the BMP) never need one.
        let plain = [' ', '!', '#', '[', ']', '\u{7f}', 'é', '€', '\u{FFFF}', 'x'];
        for escape_astral in [true, false] {
            for c in special.iter().chain(&plain) {
                // Every place in a word and in the first two 16-byte blocks.
                for before in 0..40 {
                    for after in [0, 1, 7, 8, 9, 15, 16, 17, 33] {
                        let text: String = std::iter::repeat_n('a', before)
                            .chain([*c])
                            .chain(std::iter::repeat_n(plain[before % plain.len()], after))
                            .collect();
                        let mut out = Vec::new();
                        write_escaped(&mut out, &text, escape_astral);
                        assert_eq!(
                            String::from_utf8(out).unwrap(),
                            escaped_char_by_char(&text, escape_astral),
                            "{text:?}, escape_astral {escape_astral}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn doubles_print_like_java() {
        assert_eq!(double(42.5), "42.5");
        assert_eq!(double(100.0), "100.0");
        assert_eq!(double(-0.5), "-0.5");
        assert_eq!(double(0.001), "0.001");
        assert_eq!(double(0.0001), "1.0E-4");
        assert_eq!(double(1234567.0), "1234567.0");
        assert_eq!(double(12345678.0), "1.2345678E7");
        assert_eq!(double(1e21), "1.0E21");
        assert_eq!(double(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(double(0.0), "0.0");
    }

    proptest::proptest! {
        /// Any text, escaped in blocks and words, is escaped as character by character.
        #[test]
        fn any_text_is_escaped_as_character_by_character(
            text in "(\\PC|[\\x00-\\x1f\"\\\\]|[a-z]{1,20}){0,80}",
            escape_astral in proptest::prelude::any::<bool>(),
        ) {
            let mut out = Vec::new();
            write_escaped(&mut out, &text, escape_astral);
            proptest::prop_assert_eq!(String::from_utf8(out).unwrap(), escaped_char_by_char(&text, escape_astral));
        }
    }
}
