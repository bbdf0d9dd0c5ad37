//! The binary `COPY` of `planned_trials` rows, encoded here and sent in large chunks.
//!
//! tokio-postgres' `BinaryCopyInWriter` hands the connection a message every 4 KiB, about
//! four ~1 KB trials: at 1,000,000 trials some 270,000 messages, each a wake-up of the
//! connection task and a socket write (a tenth of the coordinator's CPU during a submit in
//! `perf`, docs/performance-notebook.md "A million trials"). [`TrialCopy`] writes the same binary
//! format (PostgreSQL's `COPY ... FROM STDIN BINARY`: the signature, flags and header
//! extension, then per row the field count and each field as length and bytes, then `-1`)
//! into a buffer handed over every [`CHUNK_BYTES`]. The column types are fixed by
//! [`COPY_TRIALS_SQL`]: uuid (16 bytes), int4 (4 bytes, big-endian) and text (UTF-8; the
//! document too, since migration 0031).

use std::future::poll_fn;
use std::pin::Pin;

use akbench_core::plan::PlannedTrial;
use bytes::{BufMut, Bytes, BytesMut};
use futures_sink::Sink;
use tokio_postgres::CopyInSink;
use uuid::Uuid;

use super::{retries, COPY_TRIALS_SQL};
use crate::store::{StoreError, Tx};

/// The buffer is handed to the connection once it holds this many bytes.
const CHUNK_BYTES: usize = 256 << 10;
/// The binary COPY signature, then flags (0) and the header extension's length (0).
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";
/// Fields per row of [`COPY_TRIALS_SQL`].
const FIELDS: i16 = 9;

/// One `COPY planned_trials` in progress inside a transaction.
pub(super) struct TrialCopy {
    sink: Pin<Box<CopyInSink<Bytes>>>,
    buf: BytesMut,
}

impl TrialCopy {
    /// Starts the COPY on `tx`.
    pub(super) async fn start(tx: &Tx<'_>) -> Result<Self, StoreError> {
        let sink = tx.copy_in::<_, Bytes>(COPY_TRIALS_SQL).await?;
        let mut buf = BytesMut::with_capacity(CHUNK_BYTES + (64 << 10));
        buf.put_slice(HEADER);
        Ok(Self {
            sink: Box::pin(sink),
            buf,
        })
    }

    /// Adds trial `t` of run `run_id` with its canonical JSON `text`.
    pub(super) async fn row(
        &mut self,
        run_id: &Uuid,
        t: &PlannedTrial,
        text: &str,
    ) -> Result<(), StoreError> {
        let ordinal = i32::try_from(t.ordinal)
            .map_err(|_| StoreError::Invalid(format!("ordinal {} is too large", t.ordinal)))?;
        let repetition = i32::try_from(t.repetition).map_err(|_| {
            StoreError::Invalid(format!("repetition {} is too large", t.repetition))
        })?;
        let b = &mut self.buf;
        b.put_i16(FIELDS);
        put_uuid(b, &t.trial_id);
        put_uuid(b, run_id);
        put_int4(b, ordinal);
        put_text(b, &t.key)?;
        put_text(b, &t.task.id)?;
        put_text(b, &t.agent.label)?;
        put_int4(b, repetition);
        put_int4(b, retries(t));
        put_text(b, text)?;
        if self.buf.len() >= CHUNK_BYTES {
            self.send().await?;
        }
        Ok(())
    }

    /// Sends the trailer and ends the COPY; returns the rows copied.
    pub(super) async fn finish(mut self) -> Result<u64, StoreError> {
        self.buf.put_i16(-1);
        self.send().await?;
        Ok(self.sink.as_mut().finish().await?)
    }

    /// Hands the buffer to the connection (waiting while it is busy).
    async fn send(&mut self) -> Result<(), StoreError> {
        let data = self.buf.split().freeze();
        let sink = &mut self.sink;
        poll_fn(|cx| sink.as_mut().poll_ready(cx)).await?;
        sink.as_mut().start_send(data)?;
        Ok(())
    }
}

fn put_uuid(b: &mut BytesMut, id: &Uuid) {
    b.put_i32(16);
    b.put_slice(id.as_bytes());
}

fn put_int4(b: &mut BytesMut, v: i32) {
    b.put_i32(4);
    b.put_i32(v);
}

fn put_text(b: &mut BytesMut, s: &str) -> Result<(), StoreError> {
    let len = i32::try_from(s.len())
        .map_err(|_| StoreError::Invalid(format!("a field of {} bytes is too large", s.len())))?;
    b.put_i32(len);
    b.put_slice(s.as_bytes());
    Ok(())
}
