//! PEM and key-pair handling with Go's semantics and error texts (`encoding/pem.Decode`,
//! `x509.CertPool.AppendCertsFromPEM`, client-go's CA error reporting, `tls.X509KeyPair`).

use std::sync::Arc;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls_pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs1KeyDer, PrivatePkcs8KeyDer, PrivateSec1KeyDer,
};

/// One decoded PEM block.
pub(crate) struct Block {
    pub kind: String,
    pub has_headers: bool,
    pub der: Vec<u8>,
}

const PEM_START: &[u8] = b"\n-----BEGIN ";
const PEM_END: &[u8] = b"\n-----END ";
const PEM_END_OF_LINE: &[u8] = b"-----";

fn get_line(data: &[u8]) -> (&[u8], &[u8]) {
    let (line, rest) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &data[data.len()..]),
    };
    let end = line
        .iter()
        .rposition(|&b| !matches!(b, b' ' | b'\t' | b'\r'))
        .map_or(0, |i| i + 1);
    (&line[..end], rest)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Go's `pem.Decode`: the next valid block and the rest, or `None` when no block remains.
pub(crate) fn decode(data: &[u8]) -> Option<(Block, &[u8])> {
    use base64::Engine as _;
    let mut rest = data;
    loop {
        if rest.starts_with(&PEM_START[1..]) {
            rest = &rest[PEM_START.len() - 1..];
        } else if let Some(i) = find(rest, PEM_START) {
            rest = &rest[i + PEM_START.len()..];
        } else {
            return None;
        }
        let (type_line, after_type) = get_line(rest);
        rest = after_type;
        let Some(kind) = type_line.strip_suffix(PEM_END_OF_LINE) else {
            continue;
        };
        let mut has_headers = false;
        let mut body = rest;
        loop {
            if body.is_empty() {
                return None;
            }
            let (line, next) = get_line(body);
            if !line.contains(&b':') {
                break;
            }
            has_headers = true;
            body = next;
        }
        let (end_index, trailer_index) = if !has_headers && body.starts_with(&PEM_END[1..]) {
            (0, PEM_END.len() - 1)
        } else {
            match find(body, PEM_END) {
                Some(i) => (i, i + PEM_END.len()),
                None => continue,
            }
        };
        let trailer = &body[trailer_index..];
        let trailer_len = kind.len() + PEM_END_OF_LINE.len();
        if trailer.len() < trailer_len {
            continue;
        }
        let (end_line, rest_of_end_line) = trailer.split_at(trailer_len);
        if !end_line.starts_with(kind) || !end_line.ends_with(PEM_END_OF_LINE) {
            continue;
        }
        if !get_line(rest_of_end_line).0.is_empty() {
            continue;
        }
        let b64: Vec<u8> = body[..end_index]
            .iter()
            .copied()
            .filter(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
            .collect();
        let Ok(der) = base64::engine::general_purpose::STANDARD.decode(&b64) else {
            continue;
        };
        let (_, after) = get_line(&body[end_index + PEM_END.len() - 1..]);
        let block = Block {
            kind: String::from_utf8_lossy(kind).into_owned(),
            has_headers,
            der,
        };
        return Some((block, after));
    }
}

/// Adds the CA bundle to `roots` like `AppendCertsFromPEM`; when no certificate could be added,
/// returns client-go's explanation (`unable to load root certificates: …`).
pub(crate) fn add_ca_bundle(roots: &mut RootCertStore, bundle: &[u8]) -> Result<(), String> {
    let mut added = 0usize;
    let mut rest = bundle;
    while let Some((block, next)) = decode(rest) {
        rest = next;
        if block.kind != "CERTIFICATE" || block.has_headers {
            continue;
        }
        if roots.add(CertificateDer::from(block.der)).is_ok() {
            added += 1;
        }
    }
    if added > 0 {
        return Ok(());
    }
    Err(format!(
        "unable to load root certificates: {}",
        ca_parse_error(bundle)
    ))
}

/// client-go's `createErrorParsingCAData`.
fn ca_parse_error(mut data: &[u8]) -> String {
    while !data.is_empty() {
        let Some((block, next)) = decode(data) else {
            return "unable to parse bytes as PEM block".into();
        };
        data = next;
        if block.kind != "CERTIFICATE" || block.has_headers {
            continue;
        }
        let mut probe = RootCertStore::empty();
        if probe.add(CertificateDer::from(block.der)).is_err() {
            return "failed to parse certificate: x509: malformed certificate".into();
        }
    }
    "no valid certificate authority data seen".into()
}

fn go_list(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

/// Go's `tls.X509KeyPair`, producing a rustls certified key.
pub(crate) fn key_pair(
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &Arc<CryptoProvider>,
) -> Result<CertifiedKey, String> {
    let mut chain = Vec::new();
    let mut skipped = Vec::new();
    let mut rest = cert_pem;
    while let Some((block, next)) = decode(rest) {
        rest = next;
        if block.kind == "CERTIFICATE" {
            chain.push(CertificateDer::from(block.der));
        } else {
            skipped.push(block.kind);
        }
    }
    if chain.is_empty() {
        return Err(match skipped.as_slice() {
            [] => "tls: failed to find any PEM data in certificate input".into(),
            [one] if one.ends_with("PRIVATE KEY") => "tls: failed to find certificate PEM data in certificate input, but did find a private key; PEM inputs may have been switched".into(),
            _ => format!(
                "tls: failed to find \"CERTIFICATE\" PEM block in certificate input after skipping PEM blocks of the following types: {}",
                go_list(&skipped)
            ),
        });
    }
    skipped.clear();
    let mut rest = key_pem;
    let key_block = loop {
        let Some((block, next)) = decode(rest) else {
            return Err(match skipped.as_slice() {
                [] => "tls: failed to find any PEM data in key input".into(),
                [one] if one == "CERTIFICATE" => {
                    "tls: found a certificate rather than a key in the PEM for the private key"
                        .into()
                }
                _ => format!(
                    "tls: failed to find PEM block with type ending in \"PRIVATE KEY\" in key input after skipping PEM blocks of the following types: {}",
                    go_list(&skipped)
                ),
            });
        };
        rest = next;
        if block.kind == "PRIVATE KEY" || block.kind.ends_with(" PRIVATE KEY") {
            break block;
        }
        skipped.push(block.kind);
    };
    let der = key_block.der;
    let candidates = [
        PrivateKeyDer::Pkcs1(PrivatePkcs1KeyDer::from(der.clone())),
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der.clone())),
        PrivateKeyDer::Sec1(PrivateSec1KeyDer::from(der)),
    ];
    let signing_key = candidates
        .into_iter()
        .find_map(|k| provider.key_provider.load_private_key(k).ok())
        .ok_or_else(|| "tls: failed to parse private key".to_string())?;
    let certified = CertifiedKey::new(chain, signing_key);
    match certified.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {
            Ok(certified)
        }
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
            Err("tls: private key does not match public key".into())
        }
        Err(_) => Err("x509: malformed certificate".into()),
    }
}
