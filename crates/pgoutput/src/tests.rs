//! Unit tests on hand-built edge cases. Tests on bytes captured from a real PostgreSQL 15
//! live in tests/pg15_capture.rs.

use super::*;

fn msg(parts: &[&[u8]]) -> Bytes {
    Bytes::from(parts.concat())
}

#[test]
fn begin_fields_are_big_endian() {
    let data = msg(&[
        b"B",
        &0x0102u64.to_be_bytes(),
        &7i64.to_be_bytes(),
        &42u32.to_be_bytes(),
    ]);
    assert_eq!(
        decode(data).unwrap(),
        LogicalMessage::Begin(Begin {
            final_lsn: crate::Lsn::from_u64(0x0102),
            commit_time_micros: 7,
            xid: 42
        })
    );
}

#[test]
fn insert_values_are_slices_of_the_input() {
    let data = msg(&[
        b"I",
        &1u32.to_be_bytes(),
        b"N",
        &2i16.to_be_bytes(),
        b"t",
        &3i32.to_be_bytes(),
        b"abc",
        b"n",
    ]);
    let base = data.as_ptr() as usize;
    let LogicalMessage::Insert(insert) = decode(data.clone()).unwrap() else {
        panic!()
    };
    let text = insert.new_tuple.columns[0].bytes().unwrap();
    assert_eq!(&text[..], b"abc");
    // Zero-copy: the value points into the message buffer.
    assert_eq!(text.as_ptr() as usize, base + 13);
    assert!(insert.new_tuple.columns[1].is_null());
}

#[test]
fn truncated_input_is_an_error_naming_the_field() {
    let data = msg(&[
        b"I",
        &1u32.to_be_bytes(),
        b"N",
        &1i16.to_be_bytes(),
        b"t",
        &10i32.to_be_bytes(),
        b"abc",
    ]);
    let err = decode(data).unwrap_err();
    assert_eq!(
        err,
        DecodeError::UnexpectedEnd {
            what: "TupleData.column.text",
            offset: 13
        }
    );
    assert!(err.to_string().contains("TupleData.column.text"));
}

#[test]
fn negative_lengths_are_rejected() {
    let data = msg(&[
        b"I",
        &1u32.to_be_bytes(),
        b"N",
        &1i16.to_be_bytes(),
        b"t",
        &(-1i32).to_be_bytes(),
    ]);
    assert!(matches!(
        decode(data),
        Err(DecodeError::NegativeLength { value: -1, .. })
    ));
    let data = msg(&[b"I", &1u32.to_be_bytes(), b"N", &(-3i16).to_be_bytes()]);
    assert!(matches!(
        decode(data),
        Err(DecodeError::NegativeLength { value: -3, .. })
    ));
}

#[test]
fn unknown_tags_and_kinds_are_errors() {
    assert!(matches!(
        decode(Bytes::from_static(b"Z")),
        Err(DecodeError::UnknownMessage { tag: b'Z', .. })
    ));
    assert!(matches!(
        decode(Bytes::new()),
        Err(DecodeError::UnexpectedEnd { .. })
    ));
    let data = msg(&[b"I", &1u32.to_be_bytes(), b"N", &1i16.to_be_bytes(), b"x"]);
    assert!(matches!(
        decode(data),
        Err(DecodeError::UnexpectedTag { found: b'x', .. })
    ));
    let data = msg(&[b"I", &1u32.to_be_bytes(), b"K", &0i16.to_be_bytes()]);
    assert!(matches!(
        decode(data),
        Err(DecodeError::UnexpectedTag { found: b'K', .. })
    ));
}

#[test]
fn trailing_bytes_are_an_error() {
    let data = msg(&[b"Y", &1u32.to_be_bytes(), b"s\0", b"t\0", b"!"]);
    assert_eq!(
        decode(data),
        Err(DecodeError::TrailingBytes {
            count: 1,
            offset: 9
        })
    );
}

#[test]
fn strings_must_be_terminated_and_utf8() {
    let data = msg(&[b"O", &1u64.to_be_bytes(), b"no-nul"]);
    assert!(matches!(
        decode(data),
        Err(DecodeError::UnexpectedEnd {
            what: "Origin.name",
            ..
        })
    ));
    let data = msg(&[b"O", &1u64.to_be_bytes(), b"\xff\xfe\0"]);
    assert!(matches!(
        decode(data),
        Err(DecodeError::InvalidUtf8 {
            what: "Origin.name",
            ..
        })
    ));
}

#[test]
fn huge_counts_fail_before_allocating() {
    let data = msg(&[b"T", &u32::MAX.to_be_bytes(), &[0u8]]);
    assert!(matches!(
        decode(data),
        Err(DecodeError::UnexpectedEnd {
            what: "Truncate.relation_ids",
            ..
        })
    ));
    let data = msg(&[
        b"R",
        &1u32.to_be_bytes(),
        b"s\0t\0d",
        &i16::MAX.to_be_bytes(),
    ]);
    assert!(matches!(
        decode(data),
        Err(DecodeError::UnexpectedEnd {
            what: "Relation.columns",
            ..
        })
    ));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// Arbitrary bytes never panic the decoder.
        #[test]
        fn arbitrary_bytes_never_panic(tag in prop::sample::select(b"BCORYIUDTMZ".to_vec()), body in prop::collection::vec(any::<u8>(), 0..64)) {
            let mut data = vec![tag];
            data.extend(body);
            let _ = decode(Bytes::from(data));
        }

        /// The relay's Insert fast path accepts exactly what `decode` accepts, and its
        /// column positions point at the values `decode` slices.
        #[test]
        fn insert_positions_agree_with_decode(body in prop::collection::vec(any::<u8>(), 0..64), columns in prop::collection::vec(prop::option::of(prop::collection::vec(any::<u8>(), 0..8)), 0..6)) {
            let mut data = vec![b'I', 0, 0, 0, 7, b'N'];
            data.extend((columns.len() as i16).to_be_bytes());
            for c in &columns {
                match c {
                    None => data.push(b'n'),
                    Some(v) => {
                        data.push(b't');
                        data.extend((v.len() as i32).to_be_bytes());
                        data.extend(v);
                    }
                }
            }
            for input in [Bytes::from(data), Bytes::from([&[b'I'][..], &body].concat())] {
                let mut positions = Vec::new();
                let fast = decode_insert_columns(&input, &mut positions);
                match (decode(input.clone()), fast) {
                    (Ok(LogicalMessage::Insert(insert)), Ok(Some(id))) => {
                        prop_assert_eq!(insert.relation_id, id);
                        prop_assert_eq!(insert.new_tuple.columns.len(), positions.len());
                        for (value, position) in insert.new_tuple.columns.iter().zip(&positions) {
                            match (value, position) {
                                (ColumnValue::Null, RawColumn::Null) | (ColumnValue::UnchangedToast, RawColumn::UnchangedToast) => {}
                                (ColumnValue::Text(v), RawColumn::Text(r)) | (ColumnValue::Binary(v), RawColumn::Binary(r)) => {
                                    prop_assert_eq!(&v[..], &input[r.clone()]);
                                }
                                other => prop_assert!(false, "{:?}", other),
                            }
                        }
                    }
                    (Err(a), Err(b)) => prop_assert_eq!(a, b),
                    other => prop_assert!(false, "decode and the fast path disagree: {:?}", other),
                }
            }
        }
    }
}
