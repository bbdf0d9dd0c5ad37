//! TLS interception for the egress proxy: the worker's own certificate authority
//! ([`Authority`], made once per worker process, its private key never leaving the worker's
//! memory; only its certificate enters sandboxes, through [`super::super::trust`]), the
//! leaf certificates it mints for the names clients ask for (kept per name), and the
//! client configuration the proxy re-originates TLS with ([`upstream_config`]: the system's
//! roots plus [`UPSTREAM_CA_ENV`]).

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// Extra roots (PEM file) the proxy trusts upstream besides the system's (an internal
/// mirror's CA; a test upstream's).
pub const UPSTREAM_CA_ENV: &str = "AKBENCH_EGRESS_UPSTREAM_CA";

/// `0` turns interception off: HTTPS is tunnelled as it is (and not cached).
pub const INTERCEPT_ENV: &str = "AKBENCH_EGRESS_INTERCEPT";

/// Leaf certificates kept per worker (names past it are minted again on each use).
const MAX_LEAVES: usize = 4096;

/// The worker's interception CA.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    leaves: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

fn rc(what: &str) -> impl Fn(rcgen::Error) -> String + '_ {
    move |e| format!("cannot make the egress proxy's {what}: {e}")
}

impl Authority {
    /// A new CA (valid from an hour ago for a year).
    pub fn new() -> Result<Authority, String> {
        let mut p = CertificateParams::new(Vec::<String>::new()).map_err(rc("CA"))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "akbench worker egress CA");
        dn.push(DnType::OrganizationName, "akbench");
        p.distinguished_name = dn;
        p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let now = SystemTime::now();
        p.not_before = (now - Duration::from_secs(3600)).into();
        p.not_after = (now + Duration::from_secs(365 * 86_400)).into();
        let key = KeyPair::generate().map_err(rc("CA"))?;
        let cert = p.self_signed(&key).map_err(rc("CA"))?;
        Ok(Authority {
            cert_pem: cert.pem(),
            issuer: Issuer::new(p, key),
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// The CA's certificate (PEM): what the sandboxes trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A TLS server configuration presenting a certificate for `host` (minted once, valid
    /// from an hour ago for a week), HTTP/1.1 only.
    pub fn server_config(&self, host: &str) -> Result<Arc<rustls::ServerConfig>, String> {
        if let Some(c) = lock(&self.leaves).get(host) {
            return Ok(c.clone());
        }
        let mut p = CertificateParams::new(vec![host.to_string()]).map_err(rc("leaf"))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, host);
        p.distinguished_name = dn;
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let now = SystemTime::now();
        p.not_before = (now - Duration::from_secs(3600)).into();
        p.not_after = (now + Duration::from_secs(7 * 86_400)).into();
        let key = KeyPair::generate().map_err(rc("leaf"))?;
        let cert = p.signed_by(&key, &self.issuer).map_err(rc("leaf"))?;
        let chain = vec![cert.der().clone()];
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS versions: {e}"))?
            .with_no_client_auth()
            .with_single_cert(chain, der)
            .map_err(|e| format!("the leaf for {host}: {e}"))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        let mut leaves = lock(&self.leaves);
        if leaves.len() < MAX_LEAVES {
            leaves.insert(host.to_string(), config.clone());
        }
        Ok(config)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What an intercepting proxy needs: the worker's CA and the upstream TLS configuration.
#[derive(Clone)]
pub struct Interception {
    /// The worker's CA.
    pub authority: Arc<Authority>,
    /// How the proxy verifies hosts.
    pub upstream: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Interception {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interception").finish_non_exhaustive()
    }
}

impl PartialEq for Interception {
    fn eq(&self, o: &Self) -> bool {
        Arc::ptr_eq(&self.authority, &o.authority) && Arc::ptr_eq(&self.upstream, &o.upstream)
    }
}

impl Eq for Interception {}

impl Interception {
    /// The worker's CA and the system's roots plus `extra` (PEM, named `source`); the
    /// configuration is made once per distinct `extra` (the system's roots are read once,
    /// not per phase).
    pub fn new(extra: Option<(&str, &str)>) -> Result<Interception, String> {
        static MADE: OnceLock<Mutex<HashMap<Option<String>, Arc<rustls::ClientConfig>>>> =
            OnceLock::new();
        let key = extra.map(|(pem, _)| pem.to_string());
        let made = MADE.get_or_init(Default::default);
        // Bound first: the lock is released before the miss below takes it again.
        let known = lock(made).get(&key).cloned();
        let upstream = match known {
            Some(c) => c,
            None => {
                let c = upstream_config(extra)?;
                let mut m = lock(made);
                if m.len() < 16 {
                    m.insert(key, c.clone());
                }
                c
            }
        };
        Ok(Interception {
            authority: worker_authority()?,
            upstream,
        })
    }

    /// From the worker's settings: `None` when [`INTERCEPT_ENV`] is `0`; the extra upstream
    /// roots from [`UPSTREAM_CA_ENV`]. The error names the variable and the fix.
    pub fn from_env() -> Result<Option<Interception>, String> {
        match std::env::var(INTERCEPT_ENV).as_deref().map(str::trim) {
            Ok("0") | Ok("false") | Ok("off") => return Ok(None),
            Ok("") | Ok("1") | Ok("true") | Ok("on") | Err(_) => {}
            Ok(other) => {
                return Err(format!(
                    "{INTERCEPT_ENV}={other}: not a switch; fix: `0` (tunnel HTTPS as it is, no cache for it) or `1` (the default)"
                ))
            }
        }
        let extra = match std::env::var_os(UPSTREAM_CA_ENV).filter(|v| !v.is_empty()) {
            None => None,
            Some(path) => {
                let path = std::path::PathBuf::from(path);
                let source = format!("{UPSTREAM_CA_ENV}={}", path.display());
                let text = super::super::trust::read_operator_pem(&path).map_err(|e| {
                    format!("{source}: {e}; fix: name a readable PEM file, or unset it")
                })?;
                Some((text, source))
            }
        };
        Interception::new(extra.as_ref().map(|(t, s)| (t.as_str(), s.as_str()))).map(Some)
    }
}

/// The worker's CA, made on first use and kept for the worker's life.
pub fn worker_authority() -> Result<Arc<Authority>, String> {
    static CA: OnceLock<Result<Arc<Authority>, String>> = OnceLock::new();
    CA.get_or_init(|| Authority::new().map(Arc::new)).clone()
}

/// The proxy's TLS client configuration: the system's roots plus `extra` (PEM; the
/// operator's [`UPSTREAM_CA_ENV`] file, named in `source`), HTTP/1.1.
pub fn upstream_config(extra: Option<(&str, &str)>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for c in native.certs {
        let _ = roots.add(c);
    }
    if let Some((pem, source)) = extra {
        let mut n = 0;
        for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let c = c.map_err(|e| format!("{source}: not a PEM certificate file ({e}); fix: name a file of `-----BEGIN CERTIFICATE-----` blocks"))?;
            roots
                .add(c)
                .map_err(|e| format!("{source}: a certificate is not usable as a root ({e})"))?;
            n += 1;
        }
        if n == 0 {
            return Err(format!("{source}: holds no certificate; fix: name a file of `-----BEGIN CERTIFICATE-----` blocks"));
        }
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_are_minted_per_name_and_verify_against_the_ca() {
        let ca = Authority::new().unwrap();
        let a = ca.server_config("files.pythonhosted.org").unwrap();
        let b = ca.server_config("files.pythonhosted.org").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(!ca.cert_pem().contains("PRIVATE"));
        // A client trusting only the CA accepts the minted leaf (a real handshake in memory).
        let client = upstream_config(Some((ca.cert_pem(), "test"))).unwrap();
        let name = rustls::pki_types::ServerName::try_from("files.pythonhosted.org").unwrap();
        let mut c = rustls::ClientConnection::new(client, name).unwrap();
        let mut s = rustls::ServerConnection::new(a).unwrap();
        let mut buf = Vec::new();
        for _ in 0..10 {
            buf.clear();
            while c.wants_write() {
                c.write_tls(&mut buf).unwrap();
            }
            let mut r = &buf[..];
            while !r.is_empty() {
                s.read_tls(&mut r).unwrap();
            }
            s.process_new_packets().unwrap();
            buf.clear();
            while s.wants_write() {
                s.write_tls(&mut buf).unwrap();
            }
            let mut r = &buf[..];
            while !r.is_empty() {
                c.read_tls(&mut r).unwrap();
            }
            c.process_new_packets().unwrap();
            if !c.is_handshaking() && !s.is_handshaking() {
                break;
            }
        }
        assert!(!c.is_handshaking());
        assert!(upstream_config(Some(("nothing", "X=f")))
            .unwrap_err()
            .starts_with("X=f: holds no certificate"));
    }
}
