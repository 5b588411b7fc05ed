//! A bounds-checked cursor over one message. Every read names what it reads so that
//! errors can say which field was missing or wrong.

use crate::DecodeError;
use bytes::Bytes;

pub(crate) struct Reader<'a> {
    data: &'a Bytes,
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a Bytes) -> Self {
        Self { data, pos: 0 }
    }

    pub(crate) fn offset(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn take<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let end = self
            .pos
            .checked_add(N)
            .filter(|end| *end <= self.data.len());
        match end {
            Some(end) => {
                let mut out = [0u8; N];
                out.copy_from_slice(&self.data[self.pos..end]);
                self.pos = end;
                Ok(out)
            }
            None => Err(DecodeError::UnexpectedEnd {
                what,
                offset: self.pos,
            }),
        }
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take::<1>(what)?[0])
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.take(what)?))
    }

    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.take(what)?))
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.take(what)?))
    }

    pub(crate) fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.take(what)?))
    }

    /// An Int16 count that must not be negative.
    pub(crate) fn count_i16(&mut self, what: &'static str) -> Result<usize, DecodeError> {
        let offset = self.pos;
        let value = i16::from_be_bytes(self.take(what)?);
        usize::try_from(value).map_err(|_| DecodeError::NegativeLength {
            what,
            value: value.into(),
            offset,
        })
    }

    /// An Int32 length that must not be negative.
    pub(crate) fn len_i32(&mut self, what: &'static str) -> Result<usize, DecodeError> {
        let offset = self.pos;
        let value = self.i32(what)?;
        usize::try_from(value).map_err(|_| DecodeError::NegativeLength {
            what,
            value: value.into(),
            offset,
        })
    }

    pub(crate) fn expect_tag(&mut self, tag: u8, what: &'static str) -> Result<(), DecodeError> {
        let found = self.u8(what)?;
        if found == tag {
            Ok(())
        } else {
            Err(DecodeError::UnexpectedTag {
                what,
                found,
                offset: self.pos - 1,
            })
        }
    }

    /// `len` bytes as a zero-copy slice of the message.
    pub(crate) fn bytes(&mut self, len: usize, what: &'static str) -> Result<Bytes, DecodeError> {
        if len > self.remaining() {
            return Err(DecodeError::UnexpectedEnd {
                what,
                offset: self.pos,
            });
        }
        let out = self.data.slice(self.pos..self.pos + len);
        self.pos += len;
        Ok(out)
    }

    /// The next two bytes as a count, without consuming them (0 when absent or negative):
    /// a capacity hint only, the real read validates.
    pub(crate) fn peek_count_i16(&self) -> usize {
        self.data
            .get(self.pos..self.pos + 2)
            .map_or(0, |b| i16::from_be_bytes([b[0], b[1]]).max(0) as usize)
            .min(self.remaining())
    }

    /// A slice of the message at `range` (from [`Reader::range`]).
    pub(crate) fn data_slice(&self, range: std::ops::Range<usize>) -> Bytes {
        self.data.slice(range)
    }

    /// Skips `len` bytes and returns where they are, without slicing the buffer.
    pub(crate) fn range(
        &mut self,
        len: usize,
        what: &'static str,
    ) -> Result<std::ops::Range<usize>, DecodeError> {
        if len > self.remaining() {
            return Err(DecodeError::UnexpectedEnd {
                what,
                offset: self.pos,
            });
        }
        let start = self.pos;
        self.pos += len;
        Ok(start..self.pos)
    }

    /// A NUL-terminated UTF-8 string (names of schemas, tables, columns, types, origins).
    pub(crate) fn cstring(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let start = self.pos;
        let nul =
            self.data[start..]
                .iter()
                .position(|b| *b == 0)
                .ok_or(DecodeError::UnexpectedEnd {
                    what,
                    offset: start,
                })?;
        let text = std::str::from_utf8(&self.data[start..start + nul])
            .map_err(|_| DecodeError::InvalidUtf8 {
                what,
                offset: start,
            })?
            .to_owned();
        self.pos = start + nul + 1;
        Ok(text)
    }

    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(DecodeError::TrailingBytes {
                count,
                offset: self.pos,
            }),
        }
    }
}
