//! Readers of PostgreSQL's text output (what pgoutput and `::text` send) for the types whose
//! text is not the Connect value as it is: numeric, money, time, interval, arrays, hstore,
//! bit strings, dates and timestamps with eras and infinities.
//!
//! The relay pins the session settings these depend on (`DateStyle=ISO`,
//! `IntervalStyle=postgres`, `lc_monetary=C`, `extra_float_digits=3`) on every connection,
//! replication included, so one format per type is read here.

/// A numeric as PostgreSQL prints it: an exact decimal or one of its special values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Numeric {
    /// `unscaled × 10^-scale`; `unscaled` is a decimal integer with an optional `-`.
    Finite {
        unscaled: String,
        scale: u32,
    },
    NaN,
    Infinity,
    NegativeInfinity,
}

impl Numeric {
    /// `-12.340`, `0.5`, `NaN`, `Infinity`, `-Infinity` (PostgreSQL 14+).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "NaN" => return Some(Self::NaN),
            "Infinity" => return Some(Self::Infinity),
            "-Infinity" => return Some(Self::NegativeInfinity),
            _ => {}
        }
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        let (int, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        if int.is_empty() && fraction.is_empty()
            || !int
                .bytes()
                .chain(fraction.bytes())
                .all(|b| b.is_ascii_digit())
        {
            return None;
        }
        Some(Self::finite(
            negative,
            &format!("{int}{fraction}"),
            fraction.len() as u32,
        ))
    }

    /// `±digits × 10^-scale` with leading zeros dropped and no sign on zero.
    fn finite(negative: bool, digits: &str, scale: u32) -> Self {
        let trimmed = digits.trim_start_matches('0');
        let unscaled = match (trimmed.is_empty(), negative) {
            (true, _) => "0".to_owned(),
            (false, true) => format!("-{trimmed}"),
            (false, false) => trimmed.to_owned(),
        };
        Self::Finite { unscaled, scale }
    }

    /// The same number with `scale` fraction digits (`BigDecimal.setScale`, rounding half up
    /// when digits are dropped: `RoundingMode.HALF_UP`, what Debezium asks for).
    pub fn with_scale(&self, scale: u32) -> Self {
        let Self::Finite {
            unscaled,
            scale: have,
        } = self
        else {
            return self.clone();
        };
        let (negative, digits) = match unscaled.strip_prefix('-') {
            Some(d) => (true, d.to_owned()),
            None => (false, unscaled.clone()),
        };
        let digits = if scale >= *have {
            format!("{digits}{}", "0".repeat((scale - have) as usize))
        } else {
            let drop = (have - scale) as usize;
            let keep_len = digits.len().saturating_sub(drop);
            let (keep, dropped) = digits.split_at(keep_len);
            let mut keep = if keep.is_empty() {
                "0".to_owned()
            } else {
                keep.to_owned()
            };
            // Only the first dropped digit decides HALF_UP (digits.len() < drop means
            // it is an implicit leading 0).
            let first_dropped = if digits.len() >= drop {
                dropped.as_bytes().first().copied().unwrap_or(b'0')
            } else {
                b'0'
            };
            if first_dropped >= b'5' {
                keep = increment(&keep);
            }
            keep
        };
        Self::finite(negative, &digits, scale)
    }

    /// `BigDecimal.stripTrailingZeros()`, never below scale 0 (VariableScaleDecimal's
    /// `setScale(0)` when stripping went negative).
    pub fn strip_trailing_zeros(&self) -> Self {
        let Self::Finite { unscaled, scale } = self else {
            return self.clone();
        };
        let zeros = unscaled.len() - unscaled.trim_end_matches('0').len();
        let drop = (zeros as u32).min(*scale);
        if unscaled == "0" {
            return Self::Finite {
                unscaled: unscaled.clone(),
                scale: 0,
            };
        }
        Self::Finite {
            unscaled: unscaled[..unscaled.len() - drop as usize].to_owned(),
            scale: scale - drop,
        }
    }

    /// Java's `BigInteger.toByteArray()` of the unscaled value: two's complement, big-endian,
    /// the fewest bytes that keep the sign (Connect's `Decimal.fromLogical`).
    pub fn unscaled_bytes(&self) -> Option<Vec<u8>> {
        let Self::Finite { unscaled, .. } = self else {
            return None;
        };
        let value: num_bigint::BigInt = unscaled.parse().ok()?;
        Some(value.to_signed_bytes_be())
    }

    /// `BigDecimal.toString()`: plain digits unless the exponent is small enough for
    /// scientific notation (`1.2E-7`).
    pub fn java_string(&self) -> String {
        let Self::Finite { unscaled, scale } = self else {
            return match self {
                Self::NaN => "NaN",
                Self::Infinity => "Infinity",
                _ => "-Infinity",
            }
            .to_owned();
        };
        let (sign, digits) = match unscaled.strip_prefix('-') {
            Some(d) => ("-", d),
            None => ("", unscaled.as_str()),
        };
        let scale = i64::from(*scale);
        let adjusted = digits.len() as i64 - 1 - scale;
        if scale == 0 {
            return format!("{sign}{digits}");
        }
        if adjusted >= -6 {
            let point = digits.len() as i64 - scale;
            return if point > 0 {
                let (int, fraction) = digits.split_at(point as usize);
                format!("{sign}{int}.{fraction}")
            } else {
                format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
            };
        }
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() {
            first.to_owned()
        } else {
            format!("{first}.{rest}")
        };
        format!("{sign}{mantissa}E{adjusted}")
    }

    /// `BigDecimal.toPlainString()`.
    pub fn plain_string(&self) -> String {
        let Self::Finite { unscaled, scale } = self else {
            return self.java_string();
        };
        let (sign, digits) = match unscaled.strip_prefix('-') {
            Some(d) => ("-", d),
            None => ("", unscaled.as_str()),
        };
        let scale = *scale as usize;
        if scale == 0 {
            return format!("{sign}{digits}");
        }
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (int, fraction) = padded.split_at(padded.len() - scale);
        format!("{sign}{int}.{fraction}")
    }

    /// `BigDecimal.doubleValue()` (correctly rounded, as Rust's parser is).
    pub fn to_f64(&self) -> f64 {
        match self {
            Self::NaN => f64::NAN,
            Self::Infinity => f64::INFINITY,
            Self::NegativeInfinity => f64::NEG_INFINITY,
            Self::Finite { unscaled, scale } => {
                format!("{unscaled}e-{scale}").parse().unwrap_or(f64::NAN)
            }
        }
    }
}

fn increment(digits: &str) -> String {
    let mut bytes = digits.as_bytes().to_vec();
    for b in bytes.iter_mut().rev() {
        if *b == b'9' {
            *b = b'0';
        } else {
            *b += 1;
            return String::from_utf8(bytes).expect("ASCII digits");
        }
    }
    format!("1{}", String::from_utf8(bytes).expect("ASCII digits"))
}

/// `money` under `lc_monetary=C`: `$1,234.56`, `-$1,234.56`.
pub fn parse_money(text: &str) -> Option<Numeric> {
    let negative = text.starts_with('-') || text.starts_with('(');
    let cleaned: String = text
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    Some(match Numeric::parse(&cleaned)? {
        Numeric::Finite { unscaled, scale } => Numeric::finite(negative, &unscaled, scale),
        special => special,
    })
}

/// `HH:MM:SS[.ffffff]` → microseconds since midnight (`24:00:00` is 86,400,000,000), and
/// what follows (a time zone offset for timetz).
pub fn parse_time(text: &str) -> Option<(i64, &str)> {
    let h: i64 = text.get(0..2)?.parse().ok()?;
    if text.as_bytes().get(2) != Some(&b':') || text.as_bytes().get(5) != Some(&b':') {
        return None;
    }
    let m: i64 = text.get(3..5)?.parse().ok()?;
    let s: i64 = text.get(6..8)?.parse().ok()?;
    let mut rest = text.get(8..)?;
    let mut micros = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(fraction.len());
        micros = format!("{:0<6}", &fraction[..digits])
            .get(..6)?
            .parse()
            .ok()?;
        rest = &fraction[digits..];
    }
    Some((((h * 60 + m) * 60 + s) * 1_000_000 + micros, rest))
}

/// `+05`, `-05:30`, `+05:30:15` → seconds east of UTC.
pub fn parse_offset(text: &str) -> Option<i64> {
    let sign = match text.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let mut fields = text[1..].split(':');
    let h: i64 = fields.next()?.parse().ok()?;
    let m: i64 = fields.next().map_or(Some(0), |f| f.parse().ok())?;
    let s: i64 = fields.next().map_or(Some(0), |f| f.parse().ok())?;
    if fields.next().is_some() {
        return None;
    }
    Some(sign * (h * 3600 + m * 60 + s))
}

/// An interval as `IntervalStyle=postgres` prints it: `1 year 2 mons -3 days +04:05:06.5`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Interval {
    pub years: i32,
    pub months: i32,
    pub days: i32,
    pub hours: i64,
    pub minutes: i64,
    /// Seconds with their fraction, in microseconds (signed like the time part).
    pub micros: i64,
}

impl Interval {
    pub fn parse(text: &str) -> Option<Self> {
        let mut out = Self::default();
        let mut words = text.split_whitespace().peekable();
        while let Some(word) = words.next() {
            if word.contains(':') {
                let (negative, clock) = match word.strip_prefix('-') {
                    Some(c) => (true, c),
                    None => (false, word.strip_prefix('+').unwrap_or(word)),
                };
                let mut parts = clock.split(':');
                let h: i64 = parts.next()?.parse().ok()?;
                let m: i64 = parts.next()?.parse().ok()?;
                let s = parts.next().unwrap_or("0");
                let (whole, fraction) = s.split_once('.').unwrap_or((s, ""));
                let whole: i64 = whole.parse().ok()?;
                let fraction: i64 = if fraction.is_empty() {
                    0
                } else {
                    format!("{fraction:0<6}").get(..6)?.parse().ok()?
                };
                let sign = if negative { -1 } else { 1 };
                out.hours = sign * h;
                out.minutes = sign * m;
                out.micros = sign * (whole * 1_000_000 + fraction);
                continue;
            }
            let n: i32 = word.parse().ok()?;
            match words.next()? {
                "year" | "years" => out.years = n,
                "mon" | "mons" => out.months = n,
                "day" | "days" => out.days = n,
                _ => return None,
            }
        }
        Some(out)
    }

    /// `MicroDuration.durationMicros` with `DAYS_PER_MONTH_AVG` (365.25 / 12), in the same
    /// floating-point steps so the result is Debezium's to the microsecond.
    pub fn debezium_micros(&self) -> i64 {
        let days_per_month = 365.25 / 12.0;
        let seconds = (self.micros / 1_000_000) as f64 + (self.micros % 1_000_000) as f64 / 1e6;
        let number_of_days =
            f64::from(self.years * 12 + self.months) * days_per_month + f64::from(self.days);
        let number_of_seconds =
            ((number_of_days * 24.0 + self.hours as f64) * 60.0 + self.minutes as f64) * 60.0
                + seconds;
        (number_of_seconds * 1_000_000.0) as i64
    }

    /// `Interval.toIsoString`: `P1Y2M3DT4H5M6.78S`.
    pub fn iso_string(&self) -> String {
        let seconds = self.micros / 1_000_000;
        let fraction = (self.micros % 1_000_000).abs();
        let mut s = if fraction == 0 {
            format!("{seconds}")
        } else {
            let f = format!("{fraction:06}");
            let sign = if self.micros < 0 && seconds == 0 {
                "-"
            } else {
                ""
            };
            format!("{sign}{seconds}.{}", f.trim_end_matches('0'))
        };
        if s == "-0" {
            s = "0".into();
        }
        format!(
            "P{}Y{}M{}DT{}H{}M{}S",
            self.years, self.months, self.days, self.hours, self.minutes, s
        )
    }
}

/// The elements of a one-dimensional array literal `{a,"b c",NULL}` (`NULL` unquoted is a
/// null element). Multi-dimensional arrays are refused.
pub fn parse_array(text: &str) -> Result<Vec<Option<String>>, String> {
    // `[0:2]={…}` when the lower bound is not 1.
    let body = match text.find("={") {
        Some(i) if text.starts_with('[') => &text[i + 1..],
        _ => text,
    };
    let inner = body
        .strip_prefix('{')
        .and_then(|b| b.strip_suffix('}'))
        .ok_or_else(|| format!("not an array literal: {text:?}"))?;
    if inner.starts_with('{') {
        return Err("multi-dimensional arrays are not converted".into());
    }
    let mut out = Vec::new();
    if inner.is_empty() {
        return Ok(out);
    }
    let mut chars = inner.chars().peekable();
    loop {
        let mut element = String::new();
        let quoted = chars.peek() == Some(&'"');
        if quoted {
            chars.next();
            loop {
                match chars.next() {
                    Some('\\') => element.push(chars.next().ok_or("unterminated escape")?),
                    Some('"') => break,
                    Some(c) => element.push(c),
                    None => return Err(format!("unterminated quoted element in {text:?}")),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                element.push(c);
                chars.next();
            }
        }
        out.push(if !quoted && element == "NULL" {
            None
        } else {
            Some(element)
        });
        match chars.next() {
            None => return Ok(out),
            Some(',') => {}
            Some(c) => return Err(format!("unexpected {c:?} in array literal {text:?}")),
        }
    }
}

/// The pairs of an hstore's text, `"a"=>"1", "b"=>NULL`, in their printed order.
pub fn parse_hstore(text: &str) -> Result<Vec<(String, Option<String>)>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let quoted = |chars: &mut std::iter::Peekable<std::str::Chars>| -> Result<String, String> {
        if chars.next() != Some('"') {
            return Err(format!("not an hstore: {text:?}"));
        }
        let mut s = String::new();
        loop {
            match chars.next() {
                Some('\\') => s.push(chars.next().ok_or("unterminated escape")?),
                Some('"') => return Ok(s),
                Some(c) => s.push(c),
                None => return Err(format!("unterminated string in hstore {text:?}")),
            }
        }
    };
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let key = quoted(&mut chars)?;
        if chars.next() != Some('=') || chars.next() != Some('>') {
            return Err(format!("not an hstore: {text:?}"));
        }
        let value = if chars.peek() == Some(&'N') {
            let word: String = chars.by_ref().take(4).collect();
            if word != "NULL" {
                return Err(format!("not an hstore: {text:?}"));
            }
            None
        } else {
            Some(quoted(&mut chars)?)
        };
        out.push((key, value));
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.next() {
            None => return Ok(out),
            Some(',') => {}
            Some(c) => return Err(format!("unexpected {c:?} in hstore {text:?}")),
        }
    }
}

/// A date in `DateStyle=ISO`: `2026-01-02`, `12345-01-02`, `0044-03-15 BC` → days since
/// 1970-01-01 (proleptic Gregorian; 1 BC is year 0), and the text after the date.
pub fn parse_date(text: &str) -> Option<(i64, &str)> {
    let dash = text.find('-')?;
    let y: i64 = text[..dash].parse().ok()?;
    let m: i64 = text.get(dash + 1..dash + 3)?.parse().ok()?;
    if text.as_bytes().get(dash + 3) != Some(&b'-') {
        return None;
    }
    let d: i64 = text.get(dash + 4..dash + 6)?.parse().ok()?;
    let rest = &text[dash + 6..];
    let y = if text.ends_with(" BC") { 1 - y } else { y };
    Some((days_from_civil(y, m, d), rest))
}

/// Microseconds since the epoch of `2026-01-02 03:04:05.123456`, with an optional offset
/// (`+00`, `-05:30`) for timestamptz and ` BC` for dates before year 1.
pub fn parse_timestamp_micros(text: &str) -> Option<i64> {
    let (days, rest) = parse_date(text)?;
    let rest = rest.strip_suffix(" BC").unwrap_or(rest);
    let rest = rest.strip_prefix(' ')?;
    let (time, rest) = parse_time(rest)?;
    let offset = if rest.is_empty() {
        0
    } else {
        parse_offset(rest)?
    };
    Some((days * 86_400 - offset) * 1_000_000 + time)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}
