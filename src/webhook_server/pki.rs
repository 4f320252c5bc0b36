//! A certificate authority and a server certificate minted in memory.

use std::sync::atomic::{AtomicU64, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Names every server certificate carries besides the caller's.
pub const LOOPBACK_NAMES: [&str; 3] = ["127.0.0.1", "::1", "localhost"];

static SERIAL: AtomicU64 = AtomicU64::new(1);

/// Minting the certificates failed.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// A server name is neither a DNS name nor an IP address rcgen accepts.
    #[error("invalid server name {name:?}: {source}")]
    Name {
        /// The name given.
        name: String,
        /// Why rcgen refused it.
        source: rcgen::Error,
    },
    /// Key generation or signing failed.
    #[error("minting certificates: {0}")]
    Mint(#[from] rcgen::Error),
}

/// A fresh CA and a server certificate it signed, held in memory only.
///
/// The server certificate's subject alternative names are 127.0.0.1, ::1, localhost and the names
/// given to [`Pki::mint`]; webhooks configured with [`Pki::ca_pem`] as `caBundle` trust it.
pub struct Pki {
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    server_cert_pem: String,
    server_cert_der: CertificateDer<'static>,
    server_key_pem: String,
    server_key_der: PrivatePkcs8KeyDer<'static>,
    names: Vec<String>,
}

impl Pki {
    /// Mints a CA and a server certificate for the loopback names plus `server_names` (DNS names
    /// such as `webhook.default.svc`, or IP addresses).
    pub fn mint(server_names: &[&str]) -> Result<Pki, PkiError> {
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(
            DnType::CommonName,
            format!("hookscope webhook CA {}-{serial}", std::process::id()),
        );
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let mut names: Vec<String> = LOOPBACK_NAMES.iter().map(|s| s.to_string()).collect();
        for name in server_names {
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
        for name in server_names {
            CertificateParams::new(vec![name.to_string()]).map_err(|source| PkiError::Name {
                name: name.to_string(),
                source,
            })?;
        }
        let server_key = KeyPair::generate()?;
        let mut server_params = CertificateParams::new(names.clone())?;
        server_params
            .distinguished_name
            .push(DnType::CommonName, "hookscope webhook server");
        server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_cert = server_params.signed_by(&server_key, &issuer)?;

        Ok(Pki {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().clone(),
            server_cert_pem: server_cert.pem(),
            server_cert_der: server_cert.der().clone(),
            server_key_pem: server_key.serialize_pem(),
            server_key_der: PrivatePkcs8KeyDer::from(server_key.serialize_der()),
            names,
        })
    }

    /// The CA certificate, PEM: a webhook's `caBundle` (before base64 in YAML).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate, DER (a trust anchor for rustls clients).
    pub fn ca_der(&self) -> CertificateDer<'static> {
        self.ca_der.clone()
    }

    /// The server certificate, PEM.
    pub fn server_cert_pem(&self) -> &str {
        &self.server_cert_pem
    }

    /// The server certificate's private key, PEM (PKCS#8).
    pub fn server_key_pem(&self) -> &str {
        &self.server_key_pem
    }

    /// The server certificate's subject alternative names, loopback names first.
    pub fn server_names(&self) -> &[String] {
        &self.names
    }

    pub(crate) fn server_chain(&self) -> Vec<CertificateDer<'static>> {
        vec![self.server_cert_der.clone()]
    }

    pub(crate) fn server_key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(self.server_key_der.clone_key())
    }
}

impl Clone for Pki {
    fn clone(&self) -> Self {
        Pki {
            ca_pem: self.ca_pem.clone(),
            ca_der: self.ca_der.clone(),
            server_cert_pem: self.server_cert_pem.clone(),
            server_cert_der: self.server_cert_der.clone(),
            server_key_pem: self.server_key_pem.clone(),
            server_key_der: self.server_key_der.clone_key(),
            names: self.names.clone(),
        }
    }
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki")
            .field("server_names", &self.names)
            .finish_non_exhaustive()
    }
}
