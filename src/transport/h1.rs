//! HTTP/1.1 exchanges on a kept-alive TLS connection, framed as Go's `net/http` client frames
//! them: one request written whole, the response head parsed (`httparse`), the body read by
//! `Content-Length`, chunked coding or to the end of the connection, and the connection kept
//! for the next request only when nothing about the response forbids it.
//!
//! The calling task drives the connection itself: no connection task, no channels between the
//! two, which is most of what a general client spends per request beyond TLS and the kernel.

use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::atomic::AtomicU8;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::errors::{self, ConnAddrs, Phase};
use super::record::RecordTcp;
use crate::engine::call::{TransportError, TransportErrorKind};

/// Go's default `Transport.MaxResponseHeaderBytes` (10 MiB).
const MAX_HEAD_BYTES: usize = 10 << 20;
/// Go's `maxLineLength` for a chunk-size line.
const MAX_CHUNK_LINE: usize = 4096;
/// Headers parsed in place before falling back to a counted allocation.
const INLINE_HEADERS: usize = 32;
/// Read buffer capacity kept on an idle connection; a larger one (a large answer) is dropped.
const KEPT_BUFFER: usize = 64 * 1024;
/// How much of a redirect's body Go's client reads before following it (`maxBodySlurpSize`).
const REDIRECT_SLURP: usize = 2 << 10;
/// The most buffer reserved ahead for a body of announced length; beyond it the buffer grows as
/// bytes arrive, so an announced length alone commits no memory.
const RESERVE_AHEAD: usize = 1 << 20;

/// The byte stream under an HTTP/1.1 connection: TLS, or plain TCP for an `http://` URL a
/// webhook redirected to.
#[expect(
    clippy::large_enum_variant,
    reason = "connections are boxed whole; TLS is the variant nearly every one has"
)]
pub(super) enum H1Io {
    Tls(TlsStream<RecordTcp>),
    Plain(TcpStream),
}

impl H1Io {
    /// Whether a peer that closed without TLS `close_notify` closed where Go's TLS client accepts
    /// it: on a record boundary.
    fn closed_on_boundary(&self) -> bool {
        match self {
            H1Io::Tls(tls) => tls.get_ref().0.at_record_boundary(),
            H1Io::Plain(_) => true,
        }
    }
}

impl AsyncRead for H1Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            H1Io::Tls(tls) => Pin::new(tls).poll_read(cx, buf),
            H1Io::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for H1Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            H1Io::Tls(tls) => Pin::new(tls).poll_write(cx, buf),
            H1Io::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            H1Io::Tls(tls) => Pin::new(tls).poll_flush(cx),
            H1Io::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            H1Io::Tls(tls) => Pin::new(tls).poll_shutdown(cx),
            H1Io::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
        }
    }
}

/// An HTTP/1.1 connection that carries one request at a time.
pub(super) struct H1Conn {
    io: H1Io,
    addrs: ConnAddrs,
    /// Bytes read and not yet consumed; empty between exchanges.
    buf: Vec<u8>,
    /// The request being written, kept for the next one.
    out: Vec<u8>,
}

/// A final response, its body read to the end.
pub(super) struct H1Answer {
    pub status: u16,
    pub content_type: Option<String>,
    /// The raw `Retry-After` value of a 429 or 5xx answer.
    pub retry_after: Option<String>,
    /// Whether the body is gzip-encoded (`Content-Encoding: gzip`).
    pub gzip: bool,
    pub body: Vec<u8>,
    /// Whether the connection may carry another request.
    pub reusable: bool,
    /// The `Location` of a redirect (301, 302, 303, 307, 308) that names one; its body was
    /// skimmed, not kept, as Go's client skims it before following.
    pub location: Option<String>,
}

/// Why an exchange failed.
pub(super) enum H1Error {
    /// The request could not be written: another connection may be tried.
    NotSent(TransportError),
    /// The request was written; the exchange failed after that.
    Failed(TransportError),
}

/// How the response body is delimited (Go's `readTransfer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

/// What the exchange needs of a parsed response head.
#[derive(Debug)]
struct Head {
    len: usize,
    status: u16,
    framing: Framing,
    close: bool,
    content_type: Option<String>,
    retry_after: Option<String>,
    gzip: bool,
    /// A redirect's non-empty `Location`.
    location: Option<String>,
}

/// Whether Go's client follows a response with this status (given a `Location`).
pub(super) fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

fn broken(cause: impl std::fmt::Display) -> TransportError {
    errors::broken(TransportErrorKind::Malformed, cause)
}

fn body_failure(kind: TransportErrorKind, cause: &str) -> TransportError {
    errors::transport(kind, errors::body_error(cause))
}

impl H1Conn {
    pub(super) fn new(io: H1Io, addrs: ConnAddrs) -> Self {
        Self {
            io,
            addrs,
            buf: Vec::with_capacity(4096),
            out: Vec::new(),
        }
    }

    /// Whether an idle connection can carry a request: nothing has arrived on it since its last
    /// answer (a close, an alert, stray bytes). Costs no system call once the last read drained
    /// the socket.
    pub(super) fn is_open(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        let mut probe = [0u8; 1];
        let mut probe = ReadBuf::new(&mut probe);
        matches!(
            Pin::new(&mut self.io).poll_read(&mut cx, &mut probe),
            Poll::Pending
        )
    }

    /// Writes the request `encode` lays out (head and body) and reads the final answer.
    pub(super) async fn exchange(
        &mut self,
        encode: impl FnOnce(&mut Vec<u8>),
        max_body: usize,
        phase: &AtomicU8,
    ) -> Result<H1Answer, H1Error> {
        self.buf.clear();
        let mut request = std::mem::take(&mut self.out);
        request.clear();
        encode(&mut request);
        let written = self.write(&request).await;
        if request.capacity() <= KEPT_BUFFER {
            self.out = request;
        }
        if let Err(e) = written {
            return Err(H1Error::NotSent(errors::io_error(&self.addrs, &e, true)));
        }
        let head = self.read_head().await.map_err(H1Error::Failed)?;
        super::client::set_phase(phase, Phase::ReadingBody);
        let answer = if head.location.is_some() {
            self.skim_redirect(head).await
        } else {
            self.read_body(head, max_body)
                .await
                .map_err(H1Error::Failed)?
        };
        if self.buf.capacity() > KEPT_BUFFER {
            self.buf = Vec::with_capacity(4096);
        }
        Ok(answer)
    }

    async fn write(&mut self, request: &[u8]) -> io::Result<()> {
        self.io.write_all(request).await?;
        self.io.flush().await
    }

    /// Reads more bytes into the buffer: 0 at the end of the stream. A peer that closes without
    /// TLS `close_notify` ends the stream as Go's TLS client sees it: cleanly on a record
    /// boundary (`io.EOF`), else with a record cut short (`io.ErrUnexpectedEOF`).
    async fn fill(&mut self) -> io::Result<usize> {
        if self.buf.capacity() - self.buf.len() < 1024 {
            self.buf.reserve(self.buf.len().max(4096));
        }
        match self.io.read_buf(&mut self.buf).await {
            Err(e) if errors::unclean_close(&e) => {
                if self.io.closed_on_boundary() {
                    Ok(0)
                } else {
                    Err(errors::truncated_record())
                }
            }
            other => other,
        }
    }

    async fn read_head(&mut self) -> Result<Head, TransportError> {
        let mut informational = 0;
        // Bytes of informational heads already consumed: Go's limit counts every head byte read
        // for this response.
        let mut consumed = 0;
        // Where the search for the head's end resumes, and whether the status line was checked.
        let mut scanned = 0;
        let mut line_checked = false;
        loop {
            let from = scanned;
            // A head that came whole (the usual case) is parsed at once; one that comes in pieces
            // is parsed once its end is seen, so that each byte is searched about once.
            if (from == 0 && !self.buf.is_empty()) || head_ends(&self.buf, from) {
                match parse_head(&self.buf)? {
                    // Go reads at most the limit's bytes while looking for the end of the heads,
                    // however the bytes arrive: a head that ends past it is refused.
                    Some(head) if consumed + head.len > MAX_HEAD_BYTES => {
                        return Err(head_too_large());
                    }
                    Some(head) if (100..200).contains(&head.status) && head.status != 101 => {
                        // Go 1.24 counts no 1xx responses: only their bytes, against the
                        // head limit.
                        informational += 1;
                        consumed += head.len;
                        self.buf.drain(..head.len);
                        (scanned, line_checked) = (0, false);
                        continue;
                    }
                    Some(head) => return Ok(head),
                    None => {}
                }
            }
            scanned = self.buf.len().saturating_sub(2);
            if !line_checked && self.buf[from..].contains(&b'\n') {
                line_checked = true;
                if let Some(e) = errors::status_line_error(&self.buf) {
                    return Err(e);
                }
            }
            if consumed + self.buf.len() >= MAX_HEAD_BYTES {
                return Err(head_too_large());
            }
            let started = !self.buf.is_empty() || informational > 0;
            match self.fill().await {
                Ok(0) if started => return Err(errors::truncated_head(&self.buf)),
                Ok(0) => return Err(errors::transport(TransportErrorKind::Reset, "EOF")),
                Ok(_) => {}
                Err(e) => {
                    let err = errors::io_error(&self.addrs, &e, false);
                    return Err(if started {
                        errors::broken(err.kind, err.detail)
                    } else {
                        err
                    });
                }
            }
        }
    }

    async fn read_body(&mut self, head: Head, max_body: usize) -> Result<H1Answer, TransportError> {
        let start = head.len;
        let (body, reusable) = match head.framing {
            Framing::Empty => (Vec::new(), self.buf.len() == start),
            Framing::Length(n) => {
                if n > max_body as u64 {
                    return Err(errors::body_too_large(max_body));
                }
                let end = start + n as usize;
                self.buf
                    .reserve(end.saturating_sub(self.buf.len()).min(RESERVE_AHEAD));
                while self.buf.len() < end {
                    self.fill_body().await?;
                }
                (self.buf[start..end].to_vec(), self.buf.len() == end)
            }
            Framing::Chunked => self.read_chunked(start, max_body).await?,
            Framing::UntilClose => {
                loop {
                    if self.buf.len() - start > max_body {
                        return Err(errors::body_too_large(max_body));
                    }
                    let read = self.fill().await.map_err(|e| self.body_io_error(&e))?;
                    if read == 0 {
                        break;
                    }
                }
                (self.buf[start..].to_vec(), false)
            }
        };
        Ok(H1Answer {
            status: head.status,
            content_type: head.content_type,
            retry_after: head.retry_after,
            gzip: head.gzip,
            body,
            reusable: reusable && !head.close,
            location: None,
        })
    }

    /// A redirect's body, skimmed as Go's client skims it before following: up to 2 KiB read
    /// (only when the length is unknown or no more than that), read errors ignored. The
    /// connection is kept only when the body was read to its end.
    async fn skim_redirect(&mut self, head: Head) -> H1Answer {
        let start = head.len;
        let reusable = match head.framing {
            Framing::Empty => self.buf.len() == start,
            Framing::Length(n) if n <= REDIRECT_SLURP as u64 => {
                let end = start + n as usize;
                let mut complete = true;
                while self.buf.len() < end && complete {
                    complete = self.fill_body().await.is_ok();
                }
                complete && self.buf.len() == end
            }
            Framing::Chunked => self
                .read_chunked(start, REDIRECT_SLURP)
                .await
                .is_ok_and(|(_, reusable)| reusable),
            // Read no further: the connection is closed, not reused.
            Framing::Length(_) | Framing::UntilClose => false,
        };
        if self.buf.capacity() > KEPT_BUFFER {
            self.buf = Vec::with_capacity(4096);
        }
        H1Answer {
            status: head.status,
            content_type: head.content_type,
            retry_after: None,
            gzip: false,
            body: Vec::new(),
            reusable: reusable && !head.close,
            location: head.location,
        }
    }

    /// Reads more of a body whose end is known: the stream ending first is Go's
    /// `io.ErrUnexpectedEOF`.
    async fn fill_body(&mut self) -> Result<(), TransportError> {
        match self.fill().await {
            Ok(0) => Err(body_failure(TransportErrorKind::Reset, "unexpected EOF")),
            Ok(_) => Ok(()),
            Err(e) => Err(self.body_io_error(&e)),
        }
    }

    fn body_io_error(&self, e: &io::Error) -> TransportError {
        let err = errors::io_error(&self.addrs, e, false);
        body_failure(err.kind, &err.detail)
    }

    /// Decodes a chunked body that starts at `pos` in the buffer (Go's `internal/chunked`).
    async fn read_chunked(
        &mut self,
        mut pos: usize,
        max_body: usize,
    ) -> Result<(Vec<u8>, bool), TransportError> {
        let mut body = Vec::new();
        loop {
            let Some(line_end) = find_line(&self.buf[pos..]) else {
                if self.buf.len() - pos >= MAX_CHUNK_LINE {
                    return Err(chunk_error("header line too long"));
                }
                self.fill_body().await?;
                continue;
            };
            let size = chunk_size(&self.buf[pos..pos + line_end])?;
            if size == 0 {
                pos += line_end + 1;
                return self
                    .skip_trailer(pos)
                    .await
                    .map(|reusable| (body, reusable));
            }
            if body.len() as u64 + size > max_body as u64 {
                return Err(errors::body_too_large(max_body));
            }
            let data = pos + line_end + 1;
            let end = data + size as usize;
            while self.buf.len() < end + 2 {
                self.fill_body().await?;
            }
            if &self.buf[end..end + 2] != b"\r\n" {
                return Err(chunk_error("malformed chunked encoding"));
            }
            body.extend_from_slice(&self.buf[data..end]);
            pos = end + 2;
        }
    }

    /// Skips the trailer section after the last chunk, up to its empty line. Returns whether the
    /// connection holds nothing after it.
    async fn skip_trailer(&mut self, mut pos: usize) -> Result<bool, TransportError> {
        loop {
            let Some(line_end) = find_line(&self.buf[pos..]) else {
                if self.buf.len() - pos >= MAX_CHUNK_LINE {
                    return Err(chunk_error("header line too long"));
                }
                match self.fill().await {
                    Ok(0) => {
                        return Err(body_failure(
                            TransportErrorKind::Reset,
                            "http: unexpected EOF reading trailer",
                        ));
                    }
                    Ok(_) => continue,
                    Err(e) => return Err(self.body_io_error(&e)),
                }
            };
            let line = &self.buf[pos..pos + line_end];
            pos += line_end + 1;
            if line.is_empty() || line == b"\r" {
                return Ok(self.buf.len() == pos);
            }
        }
    }
}

/// Go's refusal of response heads longer than `MaxResponseHeaderBytes`: the read loop's error on
/// a connection it then closes, hence the `connection broken` wrapping.
fn head_too_large() -> TransportError {
    errors::broken(
        TransportErrorKind::Malformed,
        format!("net/http: server response headers exceeded {MAX_HEAD_BYTES} bytes; aborted"),
    )
}

fn chunk_error(cause: &str) -> TransportError {
    body_failure(TransportErrorKind::Malformed, cause)
}

/// Whether the bytes hold the empty line that ends a head, searching from `from` (each byte is
/// looked at about once however the head arrives).
fn head_ends(bytes: &[u8], from: usize) -> bool {
    let mut at = from;
    while let Some(i) = find_line(&bytes[at..]) {
        let nl = at + i;
        match bytes.get(nl + 1) {
            Some(b'\n') => return true,
            Some(b'\r') if bytes.get(nl + 2) == Some(&b'\n') => return true,
            _ => at = nl + 1,
        }
    }
    false
}

/// The offset of the next `\n`.
fn find_line(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', bytes)
}

/// The size on a chunk-size line (without its `\n`), checked as Go's `readChunkLine` and
/// `parseHexUint` check it.
fn chunk_size(line: &[u8]) -> Result<u64, TransportError> {
    match line.iter().position(|&b| b == b'\r') {
        None => return Err(chunk_error("chunked line ends with bare LF")),
        Some(i) if i != line.len() - 1 => return Err(chunk_error("invalid CR in chunked line")),
        Some(_) => {}
    }
    let line = &line[..line.len() - 1];
    if line.len() >= MAX_CHUNK_LINE {
        return Err(chunk_error("header line too long"));
    }
    let end = line
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .map_or(0, |i| i + 1);
    let mut digits = &line[..end];
    if let Some(semi) = digits.iter().position(|&b| b == b';') {
        digits = &digits[..semi];
    }
    if digits.is_empty() {
        return Err(chunk_error("empty hex number for chunk length"));
    }
    let mut n: u64 = 0;
    for (i, &b) in digits.iter().enumerate() {
        let v = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return Err(chunk_error("invalid byte in chunk length")),
        };
        if i == 16 {
            return Err(chunk_error("http chunk length too large"));
        }
        n = n << 4 | u64::from(v);
    }
    Ok(n)
}

/// Parses a response head at the start of `bytes`: `None` while it is incomplete.
fn parse_head(bytes: &[u8]) -> Result<Option<Head>, TransportError> {
    let mut inline = [const { MaybeUninit::uninit() }; INLINE_HEADERS];
    let parsed = match parse_with(bytes, &mut inline) {
        Err(HeadError::Syntax(httparse::Error::TooManyHeaders)) => {
            let lines = bytes.iter().filter(|&&b| b == b'\n').count();
            let mut counted = Vec::with_capacity(lines);
            counted.resize_with(lines, MaybeUninit::uninit);
            parse_with(bytes, &mut counted)
        }
        other => other,
    };
    match parsed {
        Ok(head) => Ok(head),
        Err(HeadError::Syntax(_)) => Err(errors::malformed_response(bytes)),
        Err(HeadError::Framing(cause)) => Err(broken(cause)),
    }
}

enum HeadError {
    Syntax(httparse::Error),
    /// Go's `readTransfer` refused the head: its message.
    Framing(String),
}

fn parse_with<'b>(
    bytes: &'b [u8],
    headers: &mut [MaybeUninit<httparse::Header<'b>>],
) -> Result<Option<Head>, HeadError> {
    let mut response = httparse::Response::new(&mut []);
    let mut config = httparse::ParserConfig::default();
    config.allow_multiple_spaces_in_response_status_delimiters(true);
    let len = match config
        .parse_response_with_uninit_headers(&mut response, bytes, headers)
        .map_err(HeadError::Syntax)?
    {
        httparse::Status::Complete(len) => len,
        httparse::Status::Partial => return Ok(None),
    };
    let status = response.code.unwrap_or_default();
    let http10 = response.version == Some(0);
    let mut content_type = None;
    let mut retry_after = None;
    let mut location = None;
    let mut lengths = Values::default();
    let mut encodings = Values::default();
    let (mut close, mut keep_alive) = (false, false);
    let mut encoding: Option<&[u8]> = None;
    for h in response.headers.iter() {
        let name = h.name.as_bytes();
        let is = |known: &[u8]| name.eq_ignore_ascii_case(known);
        let value = h.value.trim_ascii();
        // By length first: most headers are none of these.
        match name.len() {
            12 if is(b"content-type") => {
                content_type.get_or_insert_with(|| String::from_utf8_lossy(value).into_owned());
            }
            14 if is(b"content-length") => lengths.push(value),
            17 if is(b"transfer-encoding") => encodings.push(value),
            10 if is(b"connection") => {
                close |= has_token(value, b"close");
                keep_alive |= has_token(value, b"keep-alive");
            }
            16 if is(b"content-encoding") => {
                encoding.get_or_insert(value);
            }
            11 if is(b"retry-after") && (status == 429 || status >= 500) => {
                retry_after.get_or_insert_with(|| String::from_utf8_lossy(value).into_owned());
            }
            // Go's `Header.Get`: the first value, an empty one as good as none.
            8 if is(b"location") && is_redirect(status) => {
                location.get_or_insert_with(|| String::from_utf8_lossy(value).into_owned());
            }
            _ => {}
        }
    }
    let framing =
        framing(status, http10, &lengths.list(), &encodings.list()).map_err(HeadError::Framing)?;
    Ok(Some(Head {
        len,
        status,
        framing,
        // A 101 hands the connection over to another protocol.
        close: close || (http10 && !keep_alive) || status == 101,
        content_type,
        retry_after,
        gzip: encoding.is_some_and(|e| e.eq_ignore_ascii_case(b"gzip")),
        location: location.filter(|l| !l.is_empty()),
    }))
}

/// The values of one header, in order: the usual one or two without an allocation.
#[derive(Default)]
struct Values<'a> {
    inline: [&'a [u8]; 2],
    len: usize,
    more: Vec<&'a [u8]>,
}

impl<'a> Values<'a> {
    fn push(&mut self, value: &'a [u8]) {
        match self.inline.get_mut(self.len) {
            Some(slot) => *slot = value,
            None => self.more.push(value),
        }
        self.len += 1;
    }

    fn list(&self) -> std::borrow::Cow<'_, [&'a [u8]]> {
        if self.more.is_empty() {
            std::borrow::Cow::Borrowed(&self.inline[..self.len.min(2)])
        } else {
            std::borrow::Cow::Owned([&self.inline[..], &self.more[..]].concat())
        }
    }
}

/// Whether a comma-separated header value holds `token` (case-insensitive).
fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// Go's `%q` of a list of header values.
fn quote_list(values: &[&[u8]]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|v| crate::gofmt::quote(&String::from_utf8_lossy(v)))
        .collect();
    format!("[{}]", quoted.join(" "))
}

/// How the body is delimited, or why Go refuses the head (`parseTransferEncoding`, `fixLength`).
fn framing(
    status: u16,
    http10: bool,
    lengths: &[&[u8]],
    encodings: &[&[u8]],
) -> Result<Framing, String> {
    let chunked = match encodings {
        [] => false,
        _ if http10 => false,
        [one] if one.eq_ignore_ascii_case(b"chunked") => true,
        [one] => {
            return Err(format!(
                "unsupported transfer encoding: {}",
                crate::gofmt::quote(&String::from_utf8_lossy(one))
            ));
        }
        many => return Err(format!("too many transfer encodings: {}", quote_list(many))),
    };
    // A chunked message's Content-Length is dropped unread.
    let lengths = if chunked { &[][..] } else { lengths };
    if let [first, rest @ ..] = lengths
        && rest.iter().any(|l| l != first)
    {
        return Err(format!(
            "http: message cannot contain multiple Content-Length headers; got {}",
            quote_list(lengths)
        ));
    }
    if (100..200).contains(&status) || status == 204 || status == 304 {
        return Ok(Framing::Empty);
    }
    if chunked {
        return Ok(Framing::Chunked);
    }
    let Some(cl) = lengths.first() else {
        return Ok(Framing::UntilClose);
    };
    let quoted = || crate::gofmt::quote(&String::from_utf8_lossy(cl));
    if cl.is_empty() {
        return Err(format!("invalid empty Content-Length {}", quoted()));
    }
    let n = std::str::from_utf8(cl)
        .ok()
        .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&n| n < 1 << 63)
        .ok_or_else(|| format!("bad Content-Length {}", quoted()))?;
    Ok(if n == 0 {
        Framing::Empty
    } else {
        Framing::Length(n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Result<Option<Head>, TransportError> {
        parse_head(text.as_bytes())
    }

    fn framing_of(text: &str) -> Framing {
        head(text).unwrap().unwrap().framing
    }

    fn refusal(text: &str) -> String {
        head(text).err().unwrap().detail
    }

    #[test]
    fn heads_complete_partial_and_malformed() {
        let h = head(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
        )
        .unwrap()
        .unwrap();
        assert_eq!((h.status, h.len, h.framing), (200, 70, Framing::Length(2)));
        assert_eq!(h.content_type.as_deref(), Some("application/json"));
        assert!(!h.close && !h.gzip);
        let gzip = |text: &str| head(text).unwrap().unwrap().gzip;
        assert!(gzip("HTTP/1.1 200 OK\r\nContent-Encoding: GZip\r\n\r\n"));
        assert!(!gzip(
            "HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Encoding: gzip\r\n\r\n"
        ));
        assert!(head("HTTP/1.1 200 OK\r\nContent-Len").unwrap().is_none());
        // Go accepts several spaces around the status code, and no reason phrase.
        assert_eq!(head("HTTP/1.1  204\r\n\r\n").unwrap().unwrap().status, 204);
        assert_eq!(
            refusal("bad-http\r\n\r\n"),
            "net/http: HTTP/1.x transport connection broken: malformed HTTP response \"bad-http\""
        );
        assert_eq!(
            refusal("HTTP/1.1 2x0 OK\r\n\r\n"),
            "net/http: HTTP/1.x transport connection broken: malformed HTTP status code \"2x0\""
        );
    }

    #[test]
    fn the_end_of_a_head_is_found_wherever_the_reads_split_it() {
        let text = b"HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody";
        for cut in 0..=text.len() {
            // Everything up to `cut` was searched already, and more arrived.
            let seen_before = head_ends(&text[..cut], 0);
            assert_eq!(seen_before, cut >= 25, "{cut}");
            if !seen_before {
                assert!(head_ends(text, cut.saturating_sub(2)), "{cut}");
            }
        }
        assert!(head_ends(b"HTTP/1.0 200 OK\n\n", 0));
        assert!(!head_ends(b"HTTP/1.0 200 OK\r\n\r", 0));
    }

    #[test]
    fn heads_cut_short_are_judged_by_their_status_line() {
        let cut = |bytes: &[u8]| {
            let e = errors::truncated_head(bytes);
            (e.kind, e.detail)
        };
        let broken =
            |cause: &str| format!("net/http: HTTP/1.x transport connection broken: {cause}");
        assert_eq!(
            cut(b""),
            (TransportErrorKind::Reset, broken("unexpected EOF"))
        );
        // The unended last line is a line to Go's textproto, checked as a header line (as
        // kube-apiserver 1.33.3 reports it).
        assert_eq!(
            cut(b"HTTP/1.1 200 OK\r\nContent-Le"),
            (
                TransportErrorKind::Malformed,
                broken("malformed MIME header: missing colon: \"Content-Le\"")
            )
        );
        assert_eq!(
            cut(b"HTTP/1.1 200 OK\r\nContent-Length: 1"),
            (TransportErrorKind::Reset, broken("unexpected EOF"))
        );
        assert_eq!(
            cut(b"HTTP/1.1 200 OK\r\n\tfolded"),
            (
                TransportErrorKind::Malformed,
                broken("malformed MIME header initial line: \tfolded")
            )
        );
        // The last line counts as a line at the end of the stream, an empty one too.
        assert_eq!(
            cut(b"nonsense"),
            (
                TransportErrorKind::Malformed,
                broken("malformed HTTP response \"nonsense\"")
            )
        );
        assert_eq!(
            cut(b"\r\n"),
            (
                TransportErrorKind::Malformed,
                broken("malformed HTTP response \"\"")
            )
        );
        // A status line Go accepts but httparse does not: the fault is then in the headers.
        assert_eq!(
            refusal("HTTP/1.1 200 OK\x01"),
            broken("malformed MIME header line")
        );
        // Complete heads with a header line Go's textproto refuses.
        assert_eq!(
            refusal("HTTP/1.1 200 OK\r\nA: b\r\nNoColon\r\n\r\n"),
            broken("malformed MIME header: missing colon: \"NoColon\"")
        );
        assert_eq!(
            refusal("HTTP/1.1 200 OK\r\nBad(Key): v\r\n\r\n"),
            broken("malformed MIME header line: Bad(Key): v")
        );
    }

    #[test]
    fn many_headers_are_parsed() {
        let mut text = String::from("HTTP/1.1 200 OK\r\n");
        for i in 0..100 {
            text.push_str(&format!("X-H{i}: v\r\n"));
        }
        text.push_str("Content-Length: 5\r\n\r\n");
        assert_eq!(framing_of(&text), Framing::Length(5));
    }

    #[test]
    fn framing_follows_go_read_transfer() {
        assert_eq!(framing_of("HTTP/1.1 200 OK\r\n\r\n"), Framing::UntilClose);
        assert_eq!(
            framing_of("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
            Framing::Empty
        );
        assert_eq!(
            framing_of("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n"),
            Framing::Empty
        );
        assert_eq!(
            framing_of("HTTP/1.1 304 Not Modified\r\n\r\n"),
            Framing::Empty
        );
        assert_eq!(
            framing_of(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\nContent-Length: 9\r\n\r\n"
            ),
            Framing::Chunked
        );
        // HTTP/1.0 knows no transfer coding.
        assert_eq!(
            framing_of("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Framing::UntilClose
        );
        assert_eq!(
            framing_of("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length:  3 \r\n\r\n"),
            Framing::Length(3)
        );
        let broken = "net/http: HTTP/1.x transport connection broken: ";
        for (text, cause) in [
            ("Content-Length: 12a", "bad Content-Length \"12a\""),
            ("Content-Length: -1", "bad Content-Length \"-1\""),
            (
                "Content-Length: 9223372036854775808",
                "bad Content-Length \"9223372036854775808\"",
            ),
            ("Content-Length:", "invalid empty Content-Length \"\""),
            (
                "Content-Length: 2\r\nContent-Length: 3",
                "http: message cannot contain multiple Content-Length headers; got [\"2\" \"3\"]",
            ),
            (
                "Transfer-Encoding: gzip",
                "unsupported transfer encoding: \"gzip\"",
            ),
            (
                "Content-Length: 1\r\nContent-Length: 1\r\nContent-Length: 1\r\nContent-Length: 2",
                "http: message cannot contain multiple Content-Length headers; got [\"1\" \"1\" \"1\" \"2\"]",
            ),
            (
                "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
                "too many transfer encodings: [\"chunked\" \"chunked\"]",
            ),
        ] {
            let text = format!("HTTP/1.1 200 OK\r\n{text}\r\n\r\n");
            assert_eq!(refusal(&text), format!("{broken}{cause}"), "{text:?}");
            assert_eq!(
                head(&text).err().unwrap().kind,
                TransportErrorKind::Malformed
            );
        }
    }

    #[test]
    fn connection_header_decides_reuse() {
        let close = |text: &str| head(text).unwrap().unwrap().close;
        assert!(close(
            "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\n\r\n"
        ));
        assert!(!close("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\n"));
        assert!(close("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"));
        assert!(!close("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\r\n"));
    }

    #[test]
    fn retry_after_is_kept_only_where_client_go_reads_it() {
        let retry = |text: &str| head(text).unwrap().unwrap().retry_after;
        assert_eq!(
            retry("HTTP/1.1 503 x\r\nRetry-After: 2\r\nRetry-After: 5\r\n\r\n").as_deref(),
            Some("2")
        );
        assert_eq!(
            retry("HTTP/1.1 429 x\r\nretry-after: 1\r\n\r\n").as_deref(),
            Some("1")
        );
        assert_eq!(retry("HTTP/1.1 200 x\r\nRetry-After: 2\r\n\r\n"), None);
    }

    #[test]
    fn chunk_size_lines() {
        assert_eq!(chunk_size(b"1a\r").unwrap(), 26);
        assert_eq!(chunk_size(b"0\r").unwrap(), 0);
        assert_eq!(chunk_size(b"ff;name=value\r").unwrap(), 255);
        assert_eq!(chunk_size(b"10 \t\r").unwrap(), 16);
        assert_eq!(chunk_size(b"10;a b\r").unwrap(), 16);
        assert_eq!(chunk_size(b"ffffffffffffffff\r").unwrap(), u64::MAX);
        let cause = |line: &[u8]| chunk_size(line).err().unwrap().detail;
        let body = |c: &str| errors::body_error(c);
        assert_eq!(cause(b"1a"), body("chunked line ends with bare LF"));
        assert_eq!(cause(b"\r"), body("empty hex number for chunk length"));
        assert_eq!(cause(b"zz\r"), body("invalid byte in chunk length"));
        assert_eq!(cause(b"10 ;x\r"), body("invalid byte in chunk length"));
        assert_eq!(cause(b"1\r0\r"), body("invalid CR in chunked line"));
        assert_eq!(
            cause(b"10000000000000000\r"),
            body("http chunk length too large")
        );
    }

    #[test]
    fn tokens() {
        assert!(has_token(b"a, Close ,b", b"close"));
        assert!(!has_token(b"closed", b"close"));
    }
}
