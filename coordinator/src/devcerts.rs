//! Development certificates (rcgen): a CA, a server certificate for the coordinator and
//! client certificates for workers, as PEM. `akbench certs` writes them for compose and local
//! clusters; the TLS tests make theirs here too. Not a production PKI: the CA key sits in a
//! file next to the certificates.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use std::time::{Duration, SystemTime};

/// A certificate could not be made.
#[derive(Debug, thiserror::Error)]
#[error("failed to make the {what} certificate: {message}")]
pub struct CertError {
    /// Which certificate.
    pub what: String,
    /// The rcgen error.
    pub message: String,
}

fn err(what: &str) -> impl Fn(rcgen::Error) -> CertError + '_ {
    move |e| CertError {
        what: what.to_string(),
        message: e.to_string(),
    }
}

/// A certificate and its private key, as PEM.
#[derive(Debug, Clone)]
pub struct Pem {
    /// The certificate.
    pub cert: String,
    /// Its private key (PKCS#8).
    pub key: String,
}

/// When a certificate is valid.
#[derive(Debug, Clone, Copy)]
pub struct Validity {
    /// Not before.
    pub from: SystemTime,
    /// Not after.
    pub until: SystemTime,
}

impl Validity {
    /// From an hour ago for `days` days, at most
    /// [`akbench_core::ranges::CERT_DAYS`] (cut to it, never an overflow).
    pub fn days(days: u64) -> Validity {
        let days = akbench_core::ranges::CERT_DAYS.clamp(days);
        let now = SystemTime::now();
        Validity {
            from: now - Duration::from_secs(3600),
            until: now + Duration::from_secs(days * 86_400),
        }
    }
}

fn params(
    cn: &str,
    sans: Vec<String>,
    validity: Validity,
    what: &str,
) -> Result<CertificateParams, CertError> {
    let mut p = CertificateParams::new(sans).map_err(err(what))?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn.push(DnType::OrganizationName, "akbench development");
    p.distinguished_name = dn;
    p.not_before = validity.from.into();
    p.not_after = validity.until.into();
    Ok(p)
}

/// A certificate authority that signs server and worker certificates.
#[derive(Debug)]
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: Pem,
}

impl Ca {
    /// A new self-signed CA named `name`.
    pub fn new(name: &str, validity: Validity) -> Result<Ca, CertError> {
        let mut p = params(name, Vec::new(), validity, "CA")?;
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().map_err(err("CA"))?;
        let cert = p.self_signed(&key).map_err(err("CA"))?;
        let pem = Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        };
        Ok(Ca {
            issuer: Issuer::new(p, key),
            pem,
        })
    }

    /// A CA loaded from its PEM certificate and key (to issue more certificates later).
    pub fn from_pem(cert: &str, key: &str) -> Result<Ca, CertError> {
        let signing = KeyPair::from_pem(key).map_err(err("CA"))?;
        let issuer = Issuer::from_ca_cert_pem(cert, signing).map_err(err("CA"))?;
        Ok(Ca {
            issuer,
            pem: Pem {
                cert: cert.to_string(),
                key: key.to_string(),
            },
        })
    }

    /// The CA certificate and key.
    pub fn pem(&self) -> &Pem {
        &self.pem
    }

    /// A server certificate for the coordinator with these DNS names / IP addresses.
    pub fn server(&self, sans: &[String], validity: Validity) -> Result<Pem, CertError> {
        let cn = sans
            .first()
            .map(String::as_str)
            .unwrap_or("akbench-coordinator");
        let mut p = params(cn, sans.to_vec(), validity, "server")?;
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        self.sign(p, "server")
    }

    /// A worker's client certificate; `name` is its identity (the subject's common name).
    pub fn worker(&self, name: &str, validity: Validity) -> Result<Pem, CertError> {
        let mut p = params(name, Vec::new(), validity, "worker")?;
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        self.sign(p, "worker")
    }

    fn sign(&self, p: CertificateParams, what: &str) -> Result<Pem, CertError> {
        let key = KeyPair::generate().map_err(err(what))?;
        let cert = p.signed_by(&key, &self.issuer).map_err(err(what))?;
        Ok(Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_loaded_from_pem_issues_worker_certificates() {
        let ca = Ca::new("test CA", Validity::days(1)).unwrap();
        let again = Ca::from_pem(&ca.pem().cert, &ca.pem().key).unwrap();
        let w = again.worker("w1", Validity::days(1)).unwrap();
        assert!(w.cert.contains("BEGIN CERTIFICATE") && w.key.contains("PRIVATE KEY"));
        let der = rustls::pki_types::CertificateDer::from_pem_slice(w.cert.as_bytes()).unwrap();
        assert_eq!(
            crate::worker_identity::certificate_identity(&der),
            "cert:CN=w1"
        );
        assert!(Ca::from_pem("junk", &ca.pem().key).is_err());
    }

    use rustls::pki_types::pem::PemObject as _;
}
