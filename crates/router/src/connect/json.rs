//! JSON text exactly as Kafka Connect's JsonConverter writes it (Jackson's defaults):
//! compact, fields in insertion order, `"`/`\` and control characters escaped (`\b \t \n
//! \f \r`, others as `\u00XX` in upper-case hex), non-ASCII written as UTF-8 except
//! characters outside the Basic Multilingual Plane (emoji), which Jackson's byte generator
//! (`UTF8JsonGenerator`, what `JsonConverter` writes with) escapes as their two UTF-16
//! surrogates (`\uD83D\uDE80`), doubles in Java's `Double.toString` layout (`1.0`,
//! `1.0E10`). Text Jackson writes to a `String` (`writeValueAsString`, e.g. Debezium's hstore
//! JSON) keeps those characters as they are: [`write_string_as_text`].

/// Where JSON text is appended: a `Vec`, or the `BytesMut` records are split off (see
/// `WriteBuffer` in `connect_record.rs`).
pub trait Sink {
    fn put(&mut self, bytes: &[u8]);
    fn put_byte(&mut self, byte: u8);
    fn reserve_for(&mut self, additional: usize);
}

impl Sink for Vec<u8> {
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
    #[inline(always)]
    fn put_byte(&mut self, byte: u8) {
        self.push(byte);
    }
    #[inline(always)]
    fn reserve_for(&mut self, additional: usize) {
        self.reserve(additional);
    }
}

impl Sink for bytes::BytesMut {
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
    #[inline(always)]
    fn put_byte(&mut self, byte: u8) {
        self.extend_from_slice(&[byte]);
    }
    #[inline(always)]
    fn reserve_for(&mut self, additional: usize) {
        self.reserve(additional);
    }
}

/// Appends `text` as a JSON string literal, quotes included, as JsonConverter writes it.
pub fn write_string(out: &mut impl Sink, text: &str) {
    write_escaped::<true>(out, text);
}

/// Appends `text` as a JSON string literal as Jackson writes it to a `String`
/// (`ObjectMapper.writeValueAsString`): characters outside the BMP as they are.
pub fn write_string_as_text(out: &mut impl Sink, text: &str) {
    write_escaped::<false>(out, text);
}

/// Whether `b` is a byte JsonConverter escapes: a control character, a quote, a backslash, or
/// (with `ESCAPE_ASTRAL`) the lead byte of a 4-byte UTF-8 sequence (a character outside the
/// BMP; in a `&str`, bytes of 0xF0 and more are only those).
#[inline(always)]
fn special<const ESCAPE_ASTRAL: bool>(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\' || (ESCAPE_ASTRAL && b >= 0xF0)
}

/// The bytes of the 16 from `at` that need an escape, one bit each (bit 0: `bytes[at]`): four
/// comparisons and a mask per block (SSE2, which every x86-64 CPU has).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn specials16<const ESCAPE_ASTRAL: bool>(bytes: &[u8], at: usize) -> u32 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    assert!(at + 16 <= bytes.len());
    // SAFETY: SSE2 is part of x86-64; the load reads the 16 bytes from `at`, inside `bytes`
    // (checked above), unaligned loads allowed.
    unsafe {
        let v = _mm_loadu_si128(bytes.as_ptr().add(at).cast::<__m128i>());
        let last_control = _mm_set1_epi8(0x1F);
        // Unsigned: v <= 0x1F exactly when max(v, 0x1F) == 0x1F.
        let control = _mm_cmpeq_epi8(_mm_max_epu8(v, last_control), last_control);
        let mut hits = _mm_or_si128(
            control,
            _mm_or_si128(
                _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8)),
                _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)),
            ),
        );
        if ESCAPE_ASTRAL {
            // v >= 0xF0 exactly when max(v, 0xF0) == v.
            let astral = _mm_set1_epi8(0xF0u8 as i8);
            hits = _mm_or_si128(hits, _mm_cmpeq_epi8(_mm_max_epu8(v, astral), v));
        }
        _mm_movemask_epi8(hits) as u32
    }
}

/// Elsewhere, a byte at a time.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn specials16<const ESCAPE_ASTRAL: bool>(bytes: &[u8], at: usize) -> u32 {
    (0..16).fold(0, |mask, j| {
        mask | (u32::from(special::<ESCAPE_ASTRAL>(bytes[at + j])) << j)
    })
}

/// Writes the bytes from `start` up to `at` as they are, then the escape of the character at
/// `at`; returns where the next run starts (after that character).
#[inline(always)]
fn escape_at<const ESCAPE_ASTRAL: bool>(
    out: &mut impl Sink,
    text: &str,
    start: usize,
    at: usize,
) -> usize {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let unicode_escape = |out: &mut dyn FnMut(&[u8]), unit: u32| {
        out(&[
            b'\\',
            b'u',
            HEX[((unit >> 12) & 0xF) as usize],
            HEX[((unit >> 8) & 0xF) as usize],
            HEX[((unit >> 4) & 0xF) as usize],
            HEX[(unit & 0xF) as usize],
        ]);
    };
    let bytes = text.as_bytes();
    out.put(&bytes[start..at]);
    let b = bytes[at];
    match b {
        b'"' => out.put(b"\\\""),
        b'\\' => out.put(b"\\\\"),
        0x08 => out.put(b"\\b"),
        b'\t' => out.put(b"\\t"),
        b'\n' => out.put(b"\\n"),
        0x0C => out.put(b"\\f"),
        b'\r' => out.put(b"\\r"),
        0..=0x1F => unicode_escape(&mut |b| out.put(b), u32::from(b)),
        // The lead byte of a 4-byte sequence: a character outside the BMP, as its two
        // UTF-16 surrogates.
        _ => {
            let c = text[at..].chars().next().expect("a character starts here");
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                unicode_escape(&mut |b| out.put(b), u32::from(*unit));
            }
            return at + c.len_utf8();
        }
    }
    at + 1
}

/// One function per `ESCAPE_ASTRAL` (a constant: no test of it in the loops). Blocks of 16
/// bytes are searched at once; every byte a block's mask names is escaped from the mask,
/// without searching the block again, so that JSON text, with a quote every few bytes, costs
/// little more than a plain run.
fn write_escaped<const ESCAPE_ASTRAL: bool>(out: &mut impl Sink, text: &str) {
    let bytes = text.as_bytes();
    out.reserve_for(bytes.len() + 2);
    out.put_byte(b'"');
    // The bytes before `start` are written.
    let mut start = 0;
    let mut block = 0;
    loop {
        // Plain blocks, 32 bytes a round while there are that many.
        let mut mask = 0;
        while block + 32 <= bytes.len() {
            let low = specials16::<ESCAPE_ASTRAL>(bytes, block);
            let high = specials16::<ESCAPE_ASTRAL>(bytes, block + 16);
            mask = low | (high << 16);
            if mask != 0 {
                break;
            }
            block += 32;
        }
        if mask == 0 && block + 16 <= bytes.len() {
            mask = specials16::<ESCAPE_ASTRAL>(bytes, block);
            if mask == 0 {
                block += 16;
            }
        }
        if mask == 0 {
            break;
        }
        let end = block + if mask >> 16 != 0 { 32 } else { 16 };
        while mask != 0 {
            let at = block + mask.trailing_zeros() as usize;
            mask &= mask - 1;
            // Not inside a character escaped already (the rest of a 4-byte sequence).
            if at >= start {
                start = escape_at::<ESCAPE_ASTRAL>(out, text, start, at);
            }
        }
        block = end.max(start);
    }
    for (j, b) in bytes[block..].iter().enumerate() {
        let at = block + j;
        if at >= start && special::<ESCAPE_ASTRAL>(*b) {
            start = escape_at::<ESCAPE_ASTRAL>(out, text, start, at);
        }
    }
    out.put(&bytes[start..]);
    out.put_byte(b'"');
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

    /// `text` as [`write_string`] (`escape_astral`) or [`write_string_as_text`] writes it.
    fn escaped(text: &str, escape_astral: bool) -> String {
        let mut out = Vec::new();
        if escape_astral {
            write_string(&mut out, text);
        } else {
            write_string_as_text(&mut out, text);
        }
        String::from_utf8(out).unwrap()
    }

    /// The escape a character by character writer makes, for comparison with the block-wise
    /// search of `write_escaped`.
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
                        assert_eq!(
                            escaped(&text, escape_astral),
                            escaped_char_by_char(&text, escape_astral),
                            "{text:?}, escape_astral {escape_astral}"
                        );
                    }
                }
            }
        }
    }

    /// Several escapes in one block, and 4-byte characters across the boundary of two blocks
    /// with an escape right after them, at every offset.
    #[test]
    fn crowded_blocks_and_characters_across_blocks() {
        for offset in 0..20 {
            let text = format!("{}{}", "x".repeat(offset), "a🚀\"\\\n🎉\u{1}é".repeat(9));
            for escape_astral in [true, false] {
                assert_eq!(
                    escaped(&text, escape_astral),
                    escaped_char_by_char(&text, escape_astral),
                    "offset {offset}, escape_astral {escape_astral}"
                );
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
        /// Any text, escaped in blocks of 16 bytes and a tail, is escaped as character by character.
        #[test]
        fn any_text_is_escaped_as_character_by_character(
            text in "(\\PC|[\\x00-\\x1f\"\\\\]|[a-z]{1,20}){0,80}",
            escape_astral in proptest::prelude::any::<bool>(),
        ) {
            proptest::prop_assert_eq!(escaped(&text, escape_astral), escaped_char_by_char(&text, escape_astral));
        }
    }
}
