//! A hostile webhook: an HTTPS server on 127.0.0.1 that misbehaves on the wire, one behaviour per
//! path (like upstream's agnhost webhook, which serves one behaviour per path). It speaks
//! HTTP/1.1 by hand over rustls's synchronous API, so that it can answer what no well-behaved
//! server would: redirects anywhere, odd content types and encodings, heads of any size, and
//! TLS endings with or without `close_notify`, on a record boundary or inside a record.
//!
//! Three listeners share the behaviours: the main HTTPS one, a second HTTPS one on another port,
//! and a plain HTTP one (for redirects from `https` to `http`).
//!
//! | path | behaviour |
//! | --- | --- |
//! | `/allow` | 200, an AdmissionReview allowing the request (its `uid` echoed; empty for a GET) |
//! | `/patch` | 200, allowed with a JSONPatch adding the label `hostile.test/patched: "yes"` |
//! | `/redirect/{code}/{where}/{path}` | `{code}` with a `Location` to `/{path}` on `same` (this listener), `port` (the other HTTPS port), `host` (`localhost`, same port) or `plain` (the HTTP listener) |
//! | `/chain/{n}` | 307 to `/chain/{n-1}` down to `/chain/0`, which allows |
//! | `/redirect-without-location/{code}` | `{code}` without a `Location`, a text body |
//! | `/content-type/unparsable` | the allowing review with `Content-Type: application/json; charset` |
//! | `/content-type/text` | the allowing review as `text/plain; charset=utf-8` |
//! | `/yaml` | the allowing review in YAML, `Content-Type: application/yaml` |
//! | `/bom` | the allowing review in JSON behind a UTF-8 byte-order mark |
//! | `/encoding/br` | the allowing review, not compressed, with `Content-Encoding: br` |
//! | `/encoding/gzip-not-gzip` | the allowing review, not compressed, with `Content-Encoding: gzip` |
//! | `/framing/bad-length` | a head with `Content-Length: 1x`, then the close |
//! | `/framing/transfer-encoding-gzip` | a head with `Transfer-Encoding: gzip`, then the close |
//! | `/framing/short-body` | `Content-Length: 10` and two bytes, then the close |
//! | `/framing/cut-head` | half a head, then the close |
//! | `/framing/many-1xx` | six `100 Continue` heads, then the close |
//! | `/framing/no-colon` | a complete head with a header line without a colon |
//! | `/framing/bad-name` | a complete head with the header name `Bad(Name)` |
//! | `/no-content` | 204 without a body |
//! | `/empty` | 200 with an empty body |
//! | `/tls/no-close-notify` | the allowing review delimited by the connection's close, no `close_notify`, on a record boundary |
//! | `/tls/truncated-record` | the same, the head in a record of its own and the body's last record cut short |
//! | `/tls/truncated-first-record` | the same in one record, cut short |
//! | `/headers/at-limit` | a head of exactly 10 MiB, then the allowing review |
//! | `/headers/over-limit` | a head of 10 MiB + 16 KiB, then the allowing review |
//! | `/warnings` | allowed with 20 warnings of 300 characters each |
//! | `/large-body` | the allowing review padded with spaces to 40 MiB |
//! | `/hang` | no answer for 30 s |
//! | anything else | 404 |

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::{ServerConfig, ServerConnection, StreamOwned};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};

use super::TestPki;

/// Go's default `MaxResponseHeaderBytes`.
pub const HEAD_LIMIT: usize = 10 << 20;

/// Which listener a request arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// The main HTTPS listener.
    Main,
    /// The second HTTPS listener.
    Other,
    /// The plain HTTP listener.
    Plain,
}

/// A request as the hostile server read it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub listener: Listener,
    pub method: String,
    /// The request target, query included.
    pub target: String,
    /// Header lines as received, in order (names as sent).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Seen {
    /// The first value of a header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The header names in the order they came.
    pub fn header_names(&self) -> Vec<&str> {
        self.headers.iter().map(|(k, _)| k.as_str()).collect()
    }

    fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }

    fn uid(&self) -> String {
        serde_json::from_slice::<serde_json::Value>(&self.body)
            .ok()
            .and_then(|v| v["request"]["uid"].as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

/// How an answer ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The connection stays open for the next request.
    KeepAlive,
    /// TCP closed without a TLS `close_notify`, on a record boundary.
    NoCloseNotify,
    /// The head in a record of its own, then TCP closed inside the body's last TLS record.
    TruncatedRecord,
    /// TCP closed inside the last TLS record, the head and body in one.
    TruncatedFirstRecord,
}

struct Ports {
    main: u16,
    other: u16,
    plain: u16,
}

struct Shared {
    ports: Ports,
    seen: Mutex<Vec<Seen>>,
    stop: AtomicBool,
}

/// The hostile webhook; stops when dropped.
pub struct HostileServer {
    shared: Arc<Shared>,
    addrs: [SocketAddr; 3],
}

impl HostileServer {
    /// Starts the three listeners with the test PKI's server certificate.
    pub fn start(pki: &TestPki) -> Self {
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(pki.server_cert_pem().as_bytes())
                .collect::<Result<_, _>>()
                .expect("server cert pem");
        let key = PrivateKeyDer::from_pem_slice(pki.server_key_pem().as_bytes()).expect("key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("server config");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        // No session tickets: nothing but the answer follows the handshake.
        config.send_tls13_tickets = 0;
        let config = Arc::new(config);
        let bind = || {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind");
            l.set_nonblocking(true).expect("nonblocking");
            l
        };
        let (main, other, plain) = (bind(), bind(), bind());
        let addr = |l: &TcpListener| l.local_addr().expect("addr");
        let addrs = [addr(&main), addr(&other), addr(&plain)];
        let shared = Arc::new(Shared {
            ports: Ports {
                main: addrs[0].port(),
                other: addrs[1].port(),
                plain: addrs[2].port(),
            },
            seen: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        for (listener, which, tls) in [
            (main, Listener::Main, Some(config.clone())),
            (other, Listener::Other, Some(config)),
            (plain, Listener::Plain, None),
        ] {
            let shared = shared.clone();
            std::thread::spawn(move || accept(listener, which, tls, shared));
        }
        Self { shared, addrs }
    }

    /// `https://127.0.0.1:<main port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addrs[0])
    }

    /// The main listener's port.
    pub fn port(&self) -> u16 {
        self.addrs[0].port()
    }

    /// The second HTTPS listener's port.
    pub fn other_port(&self) -> u16 {
        self.addrs[1].port()
    }

    /// The plain HTTP listener's port.
    pub fn plain_port(&self) -> u16 {
        self.addrs[2].port()
    }

    /// Every request read so far, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Forgets the requests read so far.
    pub fn clear(&self) {
        self.shared
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

fn accept(listener: TcpListener, which: Listener, tls: Option<Arc<ServerConfig>>, s: Arc<Shared>) {
    while !s.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((tcp, _)) => {
                let (tls, s) = (tls.clone(), s.clone());
                std::thread::spawn(move || {
                    let _ = connection(tcp, which, tls, &s);
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => return,
        }
    }
}

/// The two kinds of stream a listener serves.
enum Stream {
    Tls(Box<StreamOwned<ServerConnection, TcpStream>>),
    Plain(TcpStream),
}

impl Stream {
    fn io(&mut self) -> &mut dyn ReadWrite {
        match self {
            Stream::Tls(s) => &mut **s,
            Stream::Plain(s) => s,
        }
    }

    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Tls(s) => &s.sock,
            Stream::Plain(s) => s,
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

fn connection(
    tcp: TcpStream,
    which: Listener,
    tls: Option<Arc<ServerConfig>>,
    s: &Shared,
) -> io::Result<()> {
    tcp.set_nonblocking(false)?;
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut stream = match tls {
        Some(config) => {
            let conn = ServerConnection::new(config).map_err(io::Error::other)?;
            Stream::Tls(Box::new(StreamOwned::new(conn, tcp)))
        }
        None => Stream::Plain(tcp),
    };
    let mut pending = Vec::new();
    while let Some(seen) = read_request(stream.io(), &mut pending, which)? {
        let (bytes, end) = answer(&seen, &s.ports);
        s.seen.lock().unwrap_or_else(|e| e.into_inner()).push(seen);
        match end {
            End::KeepAlive => {
                let io = stream.io();
                io.write_all(&bytes)?;
                io.flush()?;
            }
            End::NoCloseNotify => {
                let io = stream.io();
                io.write_all(&bytes)?;
                io.flush()?;
                return close(stream.tcp());
            }
            End::TruncatedRecord | End::TruncatedFirstRecord => {
                let Stream::Tls(tls) = &mut stream else {
                    return close(stream.tcp());
                };
                let mut cut = &bytes[..];
                if end == End::TruncatedRecord {
                    let head = bytes
                        .windows(4)
                        .position(|w| w == b"\r\n\r\n")
                        .map_or(0, |i| i + 4);
                    tls.write_all(&bytes[..head])?;
                    cut = &bytes[head..];
                }
                tls.flush()?;
                tls.conn.writer().write_all(cut)?;
                let mut records = Vec::new();
                while tls.conn.wants_write() {
                    tls.conn.write_tls(&mut records)?;
                }
                // All but the last five bytes of the last record.
                tls.sock.write_all(&records[..records.len() - 5])?;
                return close(&tls.sock);
            }
        }
    }
    Ok(())
}

/// Closes the TCP connection (a FIN, no TLS alert) once the client has read what was sent.
fn close(tcp: &TcpStream) -> io::Result<()> {
    tcp.shutdown(Shutdown::Write)?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut sink = [0u8; 1024];
    let mut tcp = tcp;
    while matches!(tcp.read(&mut sink), Ok(n) if n > 0) {}
    Ok(())
}

/// Reads one request (head and `Content-Length` body); None at the end of the stream.
fn read_request(
    io: &mut dyn ReadWrite,
    pending: &mut Vec<u8>,
    listener: Listener,
) -> io::Result<Option<Seen>> {
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match io.read(&mut chunk) {
            Ok(0) => return Ok(None),
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
    };
    let head = String::from_utf8_lossy(&pending[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_string();
    let target = request_line.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    while pending.len() < head_end + length {
        let n = io.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        pending.extend_from_slice(&chunk[..n]);
    }
    let body = pending[head_end..head_end + length].to_vec();
    pending.drain(..head_end + length);
    Ok(Some(Seen {
        listener,
        method,
        target,
        headers,
        body,
    }))
}

/// An AdmissionReview v1 answer for `uid` with extra response fields.
pub fn review(uid: &str, extra: serde_json::Value) -> String {
    let mut response = serde_json::json!({"uid": uid, "allowed": true});
    if let (Some(r), Some(extra)) = (response.as_object_mut(), extra.as_object()) {
        r.extend(extra.clone());
    }
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    })
    .to_string()
}

fn response(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

fn json(body: &str) -> Vec<u8> {
    response(
        "200 OK",
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    )
}

/// A head of exactly `size` bytes (filler header lines of 4000 bytes or fewer), then `body`.
fn sized_head(size: usize, body: &str) -> Vec<u8> {
    let start = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    let mut out = start.into_bytes();
    let mut n = 0;
    // Each line: `X-Filler-<n>: <value>\r\n`, leaving room for the final empty line.
    while out.len() + 2 < size {
        let name = format!("X-Filler-{n}: ");
        let room = size - 2 - out.len();
        let value = room.saturating_sub(name.len() + 2).min(4000);
        if value == 0 {
            // Too little room for another line: lengthen the previous one instead.
            let extra = room;
            let at = out.len() - 2;
            out.splice(at..at, std::iter::repeat_n(b'f', extra));
            break;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend(std::iter::repeat_n(b'f', value));
        out.extend_from_slice(b"\r\n");
        n += 1;
    }
    out.extend_from_slice(b"\r\n");
    assert_eq!(out.len(), size);
    out.extend_from_slice(body.as_bytes());
    out
}

fn answer(req: &Seen, ports: &Ports) -> (Vec<u8>, End) {
    let uid = req.uid();
    let allow = review(&uid, serde_json::json!({}));
    let segments: Vec<&str> = req.path().trim_start_matches('/').split('/').collect();
    let keep = |bytes| (bytes, End::KeepAlive);
    match segments.as_slice() {
        ["allow"] => keep(json(&allow)),
        ["patch"] => {
            use base64::Engine as _;
            let patch = r#"[{"op":"add","path":"/metadata/labels","value":{"hostile.test/patched":"yes"}}]"#;
            let b64 = base64::engine::general_purpose::STANDARD.encode(patch);
            keep(json(&review(
                &uid,
                serde_json::json!({"patchType": "JSONPatch", "patch": b64}),
            )))
        }
        ["redirect", code, place, rest @ ..] => {
            let path = rest.join("/");
            let location = match *place {
                "port" => format!("https://127.0.0.1:{}/{path}", ports.other),
                "host" => format!("https://localhost:{}/{path}", ports.main),
                "plain" => format!("http://127.0.0.1:{}/{path}", ports.plain),
                _ => format!("/{path}"),
            };
            keep(response(
                &format!("{code} Redirect"),
                &[("Location", &location), ("Content-Type", "text/plain")],
                b"redirecting\n",
            ))
        }
        ["chain", n] => match n.parse::<u32>() {
            Ok(0) | Err(_) => keep(json(&allow)),
            Ok(n) => keep(response(
                "307 Temporary Redirect",
                &[("Location", &format!("/chain/{}", n - 1))],
                b"",
            )),
        },
        ["redirect-without-location", code] => keep(response(
            &format!("{code} Redirect"),
            &[("Content-Type", "text/plain")],
            b"moved, but not saying where\n",
        )),
        ["content-type", "unparsable"] => keep(response(
            "200 OK",
            &[("Content-Type", "application/json; charset")],
            allow.as_bytes(),
        )),
        ["content-type", "text"] => keep(response(
            "200 OK",
            &[("Content-Type", "text/plain; charset=utf-8")],
            allow.as_bytes(),
        )),
        ["yaml"] => {
            let yaml = format!(
                "apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\nresponse:\n  uid: {uid}\n  allowed: true\n"
            );
            keep(response(
                "200 OK",
                &[("Content-Type", "application/yaml")],
                yaml.as_bytes(),
            ))
        }
        ["bom"] => keep(json(&format!("\u{feff}{allow}"))),
        ["encoding", "br"] => keep(response(
            "200 OK",
            &[
                ("Content-Type", "application/json"),
                ("Content-Encoding", "br"),
            ],
            allow.as_bytes(),
        )),
        ["encoding", "gzip-not-gzip"] => keep(response(
            "200 OK",
            &[
                ("Content-Type", "application/json"),
                ("Content-Encoding", "gzip"),
            ],
            allow.as_bytes(),
        )),
        ["framing", case] => {
            let raw: &[u8] = match *case {
                "bad-length" => b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
                "transfer-encoding-gzip" => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                "short-body" => {
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{}"
                }
                "cut-head" => b"HTTP/1.1 200 OK\r\nContent-Le",
                "no-colon" => b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nNoColon\r\n\r\n",
                "bad-name" => b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nBad(Name): v\r\n\r\n",
                _ => b"HTTP/1.1 100 Continue\r\n\r\n",
            };
            let repeat = if *case == "many-1xx" { 6 } else { 1 };
            (raw.repeat(repeat), End::NoCloseNotify)
        }
        ["no-content"] => keep(b"HTTP/1.1 204 No Content\r\n\r\n".to_vec()),
        ["empty"] => keep(json("")),
        ["tls", ending] => {
            let mut bytes = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n".to_vec();
            bytes.extend_from_slice(allow.as_bytes());
            let end = match *ending {
                "truncated-record" => End::TruncatedRecord,
                "truncated-first-record" => End::TruncatedFirstRecord,
                _ => End::NoCloseNotify,
            };
            (bytes, end)
        }
        ["headers", "at-limit"] => keep(sized_head(HEAD_LIMIT, &allow)),
        ["headers", "over-limit"] => keep(sized_head(HEAD_LIMIT + (16 << 10), &allow)),
        ["warnings"] => {
            let warnings: Vec<String> = (0..20)
                .map(|i| format!("{i:02} {}", "w".repeat(297)))
                .collect();
            keep(json(&review(
                &uid,
                serde_json::json!({ "warnings": warnings }),
            )))
        }
        ["hang"] => {
            std::thread::sleep(Duration::from_secs(30));
            keep(json(&allow))
        }
        ["large-body"] => {
            let mut body = allow.into_bytes();
            body.resize(40 << 20, b' ');
            keep(response(
                "200 OK",
                &[("Content-Type", "application/json")],
                &body,
            ))
        }
        _ => keep(response(
            "404 Not Found",
            &[("Content-Type", "text/plain; charset=utf-8")],
            b"404 page not found\n",
        )),
    }
}
