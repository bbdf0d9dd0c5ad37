//! A fast canonical JSON writer: a `serde_json` formatter that buffers each object's members
//! and emits them sorted by key, so values serialize straight to canonical bytes without
//! building a `serde_json::Value` tree. Output is byte-identical to the `Value` round trip
//! (checked by the tests in `digest/tests.rs`).

use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};
use std::borrow::Cow;
use std::io::{self, Write};

/// An object being written: it starts at `start` (its `{`) in the shared buffer and its
/// members follow as written, separators included; each member is `(key start, key end,
/// value start, value end)` (offsets in that buffer, the key quoted).
struct Obj {
    start: usize,
    members: Vec<Member>,
    key_at: usize,
    key_end: usize,
    value_at: usize,
}

type Member = (usize, usize, usize, usize);

/// Every byte goes to one buffer as compact JSON; an object whose members were written out
/// of order (or with a key twice) is rewritten in place when it ends (through `scratch`), one
/// already in order is left as written. Member lists are reused (`spare`): no allocation per
/// member or per object once the buffers have grown (a planned trial has ~60 members in ~12
/// objects).
struct Canon<'a> {
    buf: &'a mut Vec<u8>,
    objs: &'a mut Vec<Obj>,
    spare: Vec<Vec<Member>>,
    scratch: Vec<u8>,
    drop_top_digest: bool,
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
            CompactFormatter.$name(&mut *self.buf, v)
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
        CompactFormatter.write_null(&mut *self.buf)
    }

    fn begin_string<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.buf.push(b'"');
        Ok(())
    }

    fn end_string<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.buf.push(b'"');
        Ok(())
    }

    fn write_char_escape<W: ?Sized + Write>(
        &mut self,
        _w: &mut W,
        e: CharEscape,
    ) -> io::Result<()> {
        CompactFormatter.write_char_escape(&mut *self.buf, e)
    }

    fn begin_array<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.buf.push(b'[');
        Ok(())
    }

    fn end_array<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.buf.push(b']');
        Ok(())
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, _w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            self.buf.push(b',');
        }
        Ok(())
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        let at = self.buf.len();
        self.buf.push(b'{');
        self.objs.push(Obj {
            start: at,
            members: self.spare.pop().unwrap_or_default(),
            key_at: at,
            key_end: at,
            value_at: at,
        });
        Ok(())
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, _w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            self.buf.push(b',');
        }
        let at = self.buf.len();
        if let Some(o) = self.objs.last_mut() {
            o.key_at = at;
        }
        Ok(())
    }

    fn end_object_key<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        let at = self.buf.len();
        if let Some(o) = self.objs.last_mut() {
            o.key_end = at;
        }
        Ok(())
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.buf.push(b':');
        let at = self.buf.len();
        if let Some(o) = self.objs.last_mut() {
            o.value_at = at;
        }
        Ok(())
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        let at = self.buf.len();
        if let Some(o) = self.objs.last_mut() {
            o.members.push((o.key_at, o.key_end, o.value_at, at));
        }
        Ok(())
    }

    fn end_object<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        let Some(Obj {
            start, mut members, ..
        }) = self.objs.pop()
        else {
            return Err(io::Error::other("unbalanced object"));
        };
        let top = self.objs.is_empty();
        let drop_digest = top && self.drop_top_digest;
        let buf = &*self.buf;
        let key = |m: &Member| &buf[m.0..m.1];
        // Keys without escapes (all of akbench's own) sort by the bytes between their quotes.
        let plain = members.iter().all(|m| !key(m).contains(&b'\\'));
        let inner = |m: &Member| &buf[m.0 + 1..m.1 - 1];
        if plain {
            let in_order = members.windows(2).all(|w| inner(&w[0]) < inner(&w[1]));
            if in_order && !drop_digest {
                self.buf.push(b'}');
                members.clear();
                self.spare.push(members);
                return Ok(());
            }
            members.sort_by(|a, b| inner(a).cmp(inner(b)));
        } else {
            members.sort_by(|a, b| sort_key(key(a)).cmp(&sort_key(key(b))));
        }
        // A `Value` map keeps the last of equal keys.
        members.dedup_by(|later, earlier| {
            if key(later) == key(earlier) {
                std::mem::swap(later, earlier);
                true
            } else {
                false
            }
        });
        let out = &mut self.scratch;
        out.clear();
        out.push(b'{');
        let mut first = true;
        for m in &members {
            let k = key(m);
            if drop_digest && k == b"\"digest\"" {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(k);
            out.push(b':');
            out.extend_from_slice(&buf[m.2..m.3]);
        }
        out.push(b'}');
        self.buf.truncate(start);
        self.buf.extend_from_slice(&self.scratch);
        members.clear();
        self.spare.push(members);
        Ok(())
    }
}

/// Canonical JSON bytes of `value`; with `drop_top_digest`, the top-level `digest` member is
/// left out (for sealed documents).
pub(crate) fn to_canonical<T: Serialize + ?Sized>(value: &T, drop_top_digest: bool) -> Vec<u8> {
    let mut buf = Vec::with_capacity(1024);
    let mut objs = Vec::new();
    {
        let fmt = Canon {
            buf: &mut buf,
            objs: &mut objs,
            spare: Vec::new(),
            scratch: Vec::new(),
            drop_top_digest,
        };
        let mut sink = io::sink();
        let mut ser = serde_json::Serializer::with_formatter(&mut sink, fmt);
        value
            .serialize(&mut ser)
            .expect("domain values always serialize to JSON");
    }
    assert!(
        objs.is_empty(),
        "canonical JSON writer left unbalanced objects"
    );
    buf
}
