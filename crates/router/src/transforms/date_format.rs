//! Java's `SimpleDateFormat` in UTC, as far as topic names and Connect's transforms use it.

/// Java's `SimpleDateFormat` in UTC (`TimestampRouter`'s `timestamp.format`,
/// `TimestampConverter`'s `format`): the numeric pattern letters `y M d H m s S` (`yyyy yy MM
/// M dd d HH H mm m ss s SSS`, any width) and quoted literals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DateFormat(Vec<DatePart>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum DatePart {
    Literal(String),
    /// A field and its minimum width.
    Field(char, usize),
}

/// Why a pattern is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternError {
    /// Java refuses it too: the message of the `IllegalArgumentException` `new
    /// SimpleDateFormat(pattern)` throws (`Illegal pattern character 'q'`, `Unterminated
    /// quote`).
    Java(String),
    /// Java takes it, outbox-relay does not format it (names, zones, weeks, ...): why.
    Unsupported(String),
}

/// `DateFormatSymbols.patternChars`: every letter `SimpleDateFormat` takes.
const JAVA_PATTERN_LETTERS: &str = "GyMdkHmsSEDFwWahKzZYuXL";

impl DateFormat {
    pub fn parse(pattern: &str) -> Result<Self, String> {
        Self::compile(pattern).map_err(|e| match e {
            PatternError::Java(message) => format!("{pattern:?}: {message}"),
            PatternError::Unsupported(message) => message,
        })
    }

    /// The pattern, or why Java or outbox-relay refuses it (the first problem from the left,
    /// as Java's `SimpleDateFormat.compile` finds it).
    pub fn compile(pattern: &str) -> Result<Self, PatternError> {
        let mut parts = Vec::new();
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' => {
                    // '' is a quote; 'text' is literal text.
                    let mut text = String::new();
                    if chars.peek() == Some(&'\'') {
                        chars.next();
                        parts.push(DatePart::Literal("'".into()));
                        continue;
                    }
                    loop {
                        match chars.next() {
                            Some('\'') if chars.peek() == Some(&'\'') => {
                                chars.next();
                                text.push('\'');
                            }
                            Some('\'') => break,
                            Some(c) => text.push(c),
                            None => return Err(PatternError::Java("Unterminated quote".into())),
                        }
                    }
                    parts.push(DatePart::Literal(text));
                }
                'y' | 'M' | 'd' | 'H' | 'm' | 's' | 'S' => {
                    let mut width = 1;
                    while chars.peek() == Some(&c) {
                        chars.next();
                        width += 1;
                    }
                    if c == 'M' && width > 2 {
                        return Err(PatternError::Unsupported(format!(
                            "{pattern:?}: month names (MMM) are not supported; use MM"
                        )));
                    }
                    parts.push(DatePart::Field(c, width));
                }
                c if c.is_ascii_alphabetic() && !JAVA_PATTERN_LETTERS.contains(c) => {
                    return Err(PatternError::Java(format!(
                        "Illegal pattern character '{c}'"
                    )))
                }
                c if c.is_ascii_alphabetic() => {
                    return Err(PatternError::Unsupported(format!(
                        "{pattern:?}: the pattern letter {c:?} is not supported; outbox-relay formats y, M, d, H, m, s and S"
                    )))
                }
                c => parts.push(DatePart::Literal(c.to_string())),
            }
        }
        Ok(Self(parts))
    }

    /// `millis` since the epoch, in UTC.
    pub fn format(&self, millis: i64) -> String {
        let days = millis.div_euclid(86_400_000);
        let ms_of_day = millis.rem_euclid(86_400_000);
        let (year, month, day) = civil_from_days(days);
        let mut out = String::new();
        for part in &self.0 {
            match part {
                DatePart::Literal(text) => out.push_str(text),
                DatePart::Field(c, width) => {
                    let value = match c {
                        // SimpleDateFormat: `yy` is the year modulo 100, other counts the
                        // whole year padded.
                        'y' if *width == 2 => year.rem_euclid(100),
                        'y' => year,
                        'M' => month as i64,
                        'd' => day as i64,
                        'H' => ms_of_day / 3_600_000,
                        'm' => ms_of_day / 60_000 % 60,
                        's' => ms_of_day / 1000 % 60,
                        _ => ms_of_day % 1000,
                    };
                    out.push_str(&format!("{value:0width$}"));
                }
            }
        }
        out
    }

    /// `SimpleDateFormat.parse(text)` in UTC, lenient (Connect's `TimestampConverter`):
    /// milliseconds since the epoch, or `None` when Java throws `ParseException`. Each field
    /// is an integer (an optional `-`, ASCII digits; spaces and tabs before it skipped),
    /// read to its width when another field follows it directly (`yyyyMMdd`), else as far as
    /// digits go; literals must match exactly; text after the pattern is ignored; values out
    /// of range roll over (`2024-02-30` is 1 March, month 13 January of the next year); `S`
    /// is milliseconds, whatever its width. A two-digit year (`yy`, `y`) lands within 80
    /// years before and 20 after `now_ms` (Java's default century, taken there when the
    /// format is made). Years are proleptic Gregorian (Java's calendar is Julian before
    /// 1582-10-15).
    pub fn parse_lenient(&self, text: &str, now_ms: i64) -> Option<i64> {
        let text: Vec<char> = text.chars().collect();
        let century_start = add_years(now_ms, -80);
        let century_start_year = civil_from_days(century_start.div_euclid(86_400_000)).0 as i32;
        // Calendar fields as Java sets them: year, month (0-based), day, hour, minute,
        // second, millisecond.
        let mut fields = [1970i32, 0, 1, 0, 0, 0, 0];
        let mut ambiguous_year = false;
        let mut at = 0usize;
        for (i, part) in self.0.iter().enumerate() {
            match part {
                DatePart::Literal(literal) => {
                    for c in literal.chars() {
                        if text.get(at) != Some(&c) {
                            return None;
                        }
                        at += 1;
                    }
                }
                DatePart::Field(letter, width) => {
                    let obey_width = matches!(self.0.get(i + 1), Some(DatePart::Field(..)));
                    let mut begin = at;
                    while matches!(text.get(begin), Some(' ' | '\t')) {
                        begin += 1;
                    }
                    if begin >= text.len() {
                        return None;
                    }
                    let limit = if obey_width {
                        if at + width > text.len() {
                            return None;
                        }
                        at + width
                    } else {
                        text.len()
                    };
                    let (mut value, end) = java_int(&text[..limit], begin)?;
                    let slot = match letter {
                        'y' => {
                            if *width <= 2
                                && end - begin == 2
                                && text[begin].is_ascii_digit()
                                && text[begin + 1].is_ascii_digit()
                            {
                                let ambiguous = century_start_year % 100;
                                ambiguous_year = value == ambiguous;
                                value += century_start_year / 100 * 100
                                    + if value < ambiguous { 100 } else { 0 };
                            }
                            0
                        }
                        'M' => {
                            value = value.wrapping_sub(1);
                            1
                        }
                        'd' => 2,
                        'H' => 3,
                        'm' => 4,
                        's' => 5,
                        _ => 6,
                    };
                    fields[slot] = value;
                    at = end;
                }
            }
        }
        // DateFormat.parse(String): a parse that read nothing is refused too.
        if at == 0 {
            return None;
        }
        let millis = lenient_millis(fields);
        if ambiguous_year && millis < century_start {
            fields[0] += 100;
            return Some(lenient_millis(fields));
        }
        Some(millis)
    }
}

/// `DecimalFormat.parse` as `SimpleDateFormat` reads a number (integers only, no grouping):
/// an optional `-` and ASCII digits from `at`; the number as `Number.intValue()` gives it (a
/// `Long` wrapped to 32 bits, a larger number, a `Double`, saturated) and where it ends.
fn java_int(text: &[char], at: usize) -> Option<(i32, usize)> {
    let negative = text.get(at) == Some(&'-');
    let digits_at = at + usize::from(negative);
    let mut end = digits_at;
    let mut value: i128 = 0;
    while let Some(digit) = text.get(end).and_then(|c| c.to_digit(10)) {
        value = (value * 10 + i128::from(digit)).min(i128::from(u64::MAX));
        end += 1;
    }
    if end == digits_at {
        return None;
    }
    let value = if negative { -value } else { value };
    let int = match i64::try_from(value) {
        Ok(long) => long as i32,
        Err(_) if negative => i32::MIN,
        Err(_) => i32::MAX,
    };
    Some((int, end))
}

/// Lenient `GregorianCalendar` fields (year, 0-based month, day, hour, minute, second,
/// millisecond) in UTC as milliseconds since the epoch: every field out of its range rolls
/// into the next larger one.
fn lenient_millis([year, month, day, hour, minute, second, milli]: [i32; 7]) -> i64 {
    let month = i64::from(month);
    let year = i64::from(year) + month.div_euclid(12);
    let days = days_from_civil(year, month.rem_euclid(12) as u32 + 1, 1) + i64::from(day) - 1;
    days * 86_400_000
        + i64::from(hour) * 3_600_000
        + i64::from(minute) * 60_000
        + i64::from(second) * 1000
        + i64::from(milli)
}

/// `Calendar.add(YEAR, years)` in UTC: the same day and time `years` later, 29 February
/// becoming the 28th in a common year.
fn add_years(millis: i64, years: i64) -> i64 {
    let days = millis.div_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    let year = year + years;
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let day = if month == 2 && day == 29 && !leap {
        28
    } else {
        day
    };
    days_from_civil(year, month, day) * 86_400_000 + millis.rem_euclid(86_400_000)
}

/// The day count since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    crate::connect::days_from_civil(year, i64::from(month), i64::from(day))
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let (year, month, day) = crate::connect::civil_from_days(days);
    (year, month as u32, day as u32)
}
