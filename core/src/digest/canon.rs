//! A fast canonical JSON writer: a `serde_json` formatter that buffers each object's members
//! and emits them sorted by key, so values serialize straight to canonical bytes without
//! building a `serde_json::Value` tree. Output is byte-identical to the `Value` round trip
//! (checked by the tests in `digest/tests.rs`).

use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};
use std::borrow::Cow;
use std::io::{self, Write};

enum Frame {
    Buf(Vec<u8>),
    Obj {
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        key: Vec<u8>,
        val: Vec<u8>,
        in_key: bool,
    },
}

struct Canon<'a> {
    frames: &'a mut Vec<Frame>,
    drop_top_digest: bool,
}

impl Canon<'_> {
    fn target(&mut self) -> &mut Vec<u8> {
        match self
            .frames
            .last_mut()
            .expect("the root frame is never popped")
        {
            Frame::Buf(b) => b,
            Frame::Obj {
                in_key: true, key, ..
            } => key,
            Frame::Obj { val, .. } => val,
        }
    }
}

/// The key as it sorts in a `BTreeMap<String, _>`: the unescaped UTF-8 bytes.
fn sort_key(quoted: &[u8]) -> Cow<'_, [u8]> {
    if quoted.contains(&b'\\') {
        Cow::Owned(
            serde_json::from_slice::<String>(quoted)
                .map(String::into_bytes)
                .unwrap_or_else(|_| quoted.to_vec()),
        )
    } else {
        Cow::Borrowed(&quoted[1..quoted.len().saturating_sub(1).max(1)])
    }
}

macro_rules! delegate {
    ($($name:ident($t:ty)),* $(,)?) => {
        $(fn $name<W: ?Sized + Write>(&mut self, _w: &mut W, v: $t) -> io::Result<()> {
            CompactFormatter.$name(self.target(), v)
        })*
    };
}

impl Formatter for Canon<'_> {
    delegate!(
        write_bool(bool),
        write_i8(i8),
        write_i16(i16),
        write_i32(i32),
        write_i64(i64),
        write_i128(i128),
        write_u8(u8),
        write_u16(u16),
        write_u32(u32),
        write_u64(u64),
        write_u128(u128),
        write_f64(f64),
        write_number_str(&str),
        write_string_fragment(&str),
        write_raw_fragment(&str),
        write_byte_array(&[u8]),
    );

    fn write_f32<W: ?Sized + Write>(&mut self, w: &mut W, v: f32) -> io::Result<()> {
        // A `Value` holds every float as f64.
        self.write_f64(w, f64::from(v))
    }

    fn write_null<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        CompactFormatter.write_null(self.target())
    }

    fn begin_string<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.target().push(b'"');
        Ok(())
    }

    fn end_string<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.target().push(b'"');
        Ok(())
    }

    fn write_char_escape<W: ?Sized + Write>(
        &mut self,
        _w: &mut W,
        e: CharEscape,
    ) -> io::Result<()> {
        CompactFormatter.write_char_escape(self.target(), e)
    }

    fn begin_array<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.target().push(b'[');
        Ok(())
    }

    fn end_array<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.target().push(b']');
        Ok(())
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, _w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            self.target().push(b',');
        }
        Ok(())
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.frames.push(Frame::Obj {
            entries: Vec::new(),
            key: Vec::new(),
            val: Vec::new(),
            in_key: false,
        });
        Ok(())
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, _w: &mut W, _first: bool) -> io::Result<()> {
        if let Some(Frame::Obj { in_key, .. }) = self.frames.last_mut() {
            *in_key = true;
        }
        Ok(())
    }

    fn end_object_key<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        if let Some(Frame::Obj { in_key, .. }) = self.frames.last_mut() {
            *in_key = false;
        }
        Ok(())
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        Ok(())
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        if let Some(Frame::Obj {
            entries, key, val, ..
        }) = self.frames.last_mut()
        {
            entries.push((std::mem::take(key), std::mem::take(val)));
        }
        Ok(())
    }

    fn end_object<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        let Some(Frame::Obj { mut entries, .. }) = self.frames.pop() else {
            return Err(io::Error::other("unbalanced object"));
        };
        let top = self.frames.len() == 1;
        entries.sort_by(|a, b| sort_key(&a.0).cmp(&sort_key(&b.0)));
        // A `Value` map keeps the last of equal keys.
        entries.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                std::mem::swap(later, earlier);
                true
            } else {
                false
            }
        });
        let drop_digest = top && self.drop_top_digest;
        let out = self.target();
        out.push(b'{');
        let mut first = true;
        for (k, v) in &entries {
            if drop_digest && k.as_slice() == b"\"digest\"" {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(k);
            out.push(b':');
            out.extend_from_slice(v);
        }
        out.push(b'}');
        Ok(())
    }
}

/// Canonical JSON bytes of `value`; with `drop_top_digest`, the top-level `digest` member is
/// left out (for sealed documents).
pub(crate) fn to_canonical<T: Serialize + ?Sized>(value: &T, drop_top_digest: bool) -> Vec<u8> {
    let mut frames = vec![Frame::Buf(Vec::new())];
    {
        let fmt = Canon {
            frames: &mut frames,
            drop_top_digest,
        };
        let mut sink = io::sink();
        let mut ser = serde_json::Serializer::with_formatter(&mut sink, fmt);
        value
            .serialize(&mut ser)
            .expect("domain values always serialize to JSON");
    }
    match frames.pop() {
        Some(Frame::Buf(b)) if frames.is_empty() => b,
        _ => panic!("canonical JSON writer left unbalanced frames"),
    }
}
