//! The TCP stream under a TLS connection, watching where its TLS records end.
//!
//! Go's `crypto/tls` accepts a peer that closes the connection without a `close_notify` alert
//! when the close falls on a record boundary (the read ends with `io.EOF`), and refuses one that
//! cuts a record short (`io.ErrUnexpectedEOF`). rustls reports both the same way, so the
//! transport follows the record framing of the bytes it reads: five bytes of header, the length
//! in the last two, then that many bytes. A few integer operations per read.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Length of a TLS record header.
const HEADER: u8 = 5;

/// Where a stream of TLS records stands.
#[derive(Debug, Default, Clone, Copy)]
struct Records {
    /// Header bytes of the current record seen so far (0 at a boundary or inside a body).
    header_seen: u8,
    /// The two length bytes of the header being read.
    length: [u8; 2],
    /// Body bytes of the current record still to come.
    remaining: usize,
}

impl Records {
    fn at_boundary(&self) -> bool {
        self.header_seen == 0 && self.remaining == 0
    }

    fn track(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.remaining > 0 {
                let n = self.remaining.min(bytes.len());
                self.remaining -= n;
                bytes = &bytes[n..];
                continue;
            }
            // A header byte: content type, two version bytes, two length bytes.
            match self.header_seen {
                3 => self.length[0] = bytes[0],
                4 => self.length[1] = bytes[0],
                _ => {}
            }
            self.header_seen += 1;
            bytes = &bytes[1..];
            if self.header_seen == HEADER {
                self.header_seen = 0;
                self.remaining = usize::from(u16::from_be_bytes(self.length));
            }
        }
    }
}

/// A TCP stream that knows whether the bytes read so far end on a TLS record boundary.
#[derive(Debug)]
pub(super) struct RecordTcp {
    inner: TcpStream,
    records: Records,
}

impl RecordTcp {
    pub(super) fn new(inner: TcpStream) -> Self {
        Self {
            inner,
            records: Records::default(),
        }
    }

    /// Whether the bytes read so far end exactly where a record ends.
    pub(super) fn at_record_boundary(&self) -> bool {
        self.records.at_boundary()
    }
}

impl AsyncRead for RecordTcp {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let this = &mut *self;
            this.records.track(&buf.filled()[before..]);
        }
        polled
    }
}

impl AsyncWrite for RecordTcp {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_followed_however_the_reads_split_them() {
        let mut stream = Vec::new();
        for len in [3u16, 0, 300] {
            stream.extend_from_slice(&[23, 3, 3]);
            stream.extend_from_slice(&len.to_be_bytes());
            stream.extend(std::iter::repeat_n(0xab, usize::from(len)));
        }
        for cut in 0..=stream.len() {
            let (a, b) = stream.split_at(cut);
            let mut records = Records::default();
            records.track(a);
            let boundary = [0, 8, 13, stream.len()].contains(&cut);
            assert_eq!(records.at_boundary(), boundary, "{cut}");
            records.track(b);
            assert!(records.at_boundary(), "{cut}");
        }
    }
}
