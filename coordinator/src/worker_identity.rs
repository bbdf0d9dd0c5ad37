//! Who a worker is, and which worker ids it may use.
//!
//! - [`workers_interceptor`]: the check when `Workers.Session` opens. With
//!   `require_certs`, a connection without a client certificate is refused (certificates
//!   from another CA or expired ones never get that far: the TLS handshake refuses them).
//!   A bearer token, when one is sent, must be a valid worker token, certificate or not
//!   (`UNAUTHENTICATED` when unknown, `PERMISSION_DENIED` for another role's); when the
//!   coordinator has worker tokens configured, a certificate alone is not enough either:
//!   certificate and token must both be valid. Otherwise a client certificate, a worker
//!   token, or an open coordinator lets it in. The credential ([`WorkerCredential`]) goes
//!   in the request extensions.
//! - [`WorkerCredential::check_worker_id`]: a worker certificate's name (its subject's
//!   common name) must equal the worker id of the session's `Hello`
//!   ([`akbench_core::identity::certificate_admits`]); otherwise `PERMISSION_DENIED` naming
//!   both.
//! - [`bind`]: a worker id belongs to the credential that first registered it
//!   (`worker_credentials`, migration 0009); a session for that id with another credential
//!   is refused, so one worker cannot take over another's session and leases.

use sha2::{Digest as _, Sha256};
use tonic::{Request, Status};

use crate::auth::{Role, Tokens};
use crate::store::{Store, StoreError};

const BIND_WORKER_SQL: &str = include_str!("../sql/identity/bind_worker.sql");

/// The credential a worker session opened with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkerCredential {
    /// What the worker id is bound to ([`bind`]): `cert:<subject>` when a client
    /// certificate was presented, else `token:<sha256 hex>`; `None` on an open coordinator
    /// without client certificates (nothing to bind to).
    pub binding: Option<String>,
    /// The client certificate's name (its subject's common name), when one was presented:
    /// `Some(None)` for a certificate without a common name.
    pub certificate: Option<Option<String>>,
}

impl WorkerCredential {
    /// Refuses (`PERMISSION_DENIED`, naming both) a session whose worker id is not the name
    /// of the client certificate it presented; without a certificate any id passes here.
    pub fn check_worker_id(&self, worker_id: &str) -> Result<(), Status> {
        let Some(name) = &self.certificate else {
            return Ok(());
        };
        if akbench_core::identity::certificate_admits(name.as_deref(), worker_id) {
            return Ok(());
        }
        let named = match name {
            Some(name) => format!("is issued to {name:?}"),
            None => "has no common name".to_string(),
        };
        Err(Status::permission_denied(format!(
            "failed to open a session for worker {worker_id:?}: the worker certificate \
             {named}, and a worker certificate's name must equal the worker id; fix: start \
             the worker with --worker-id equal to its certificate's name, or issue it a \
             certificate for {worker_id:?} (akbench certs --worker {worker_id})"
        )))
    }
}

/// The common name of a client certificate (DER), if it has one.
pub fn certificate_name(der: &[u8]) -> Option<String> {
    x509_parser::parse_x509_certificate(der)
        .ok()
        .and_then(|(_, cert)| {
            cert.subject()
                .iter_common_name()
                .next()
                .and_then(|cn| cn.as_str().ok())
                .map(str::to_string)
        })
}

/// The identity of a client certificate (DER): `cert:CN=<common name>`, or
/// `cert:sha256:<hex>` of the certificate when it has no common name.
pub fn certificate_identity(der: &[u8]) -> String {
    match certificate_name(der) {
        Some(cn) => format!("cert:CN={cn}"),
        None => format!("cert:sha256:{}", hex::encode(Sha256::digest(der))),
    }
}

/// The identity of a bearer token (its sha256, never the token).
pub fn token_identity(token: &str) -> String {
    format!(
        "token:{}",
        hex::encode(Sha256::digest(token.trim().as_bytes()))
    )
}

fn bearer(request: &Request<()>) -> Option<&str> {
    let value = request.metadata().get("authorization")?.to_str().ok()?;
    value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .map(str::trim)
}

/// The leaf certificate the peer presented on this connection, if any.
fn peer_certificate(request: &Request<()>) -> Option<Vec<u8>> {
    let certs = request.peer_certs()?;
    certs.first().map(|c| c.as_ref().to_vec())
}

/// The interceptor of the `Workers` service (see the module doc).
pub fn workers_interceptor(
    tokens: Tokens,
    require_certs: bool,
) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |mut request: Request<()>| {
        let credential = check_worker(&tokens, require_certs, &request)?;
        request.extensions_mut().insert(credential);
        Ok(request)
    }
}

fn check_worker(
    tokens: &Tokens,
    require_certs: bool,
    request: &Request<()>,
) -> Result<WorkerCredential, Status> {
    let certificate = peer_certificate(request);
    if certificate.is_none() && require_certs {
        return Err(Status::unauthenticated(
            "failed to open a worker session: this coordinator requires a worker certificate; \
             fix: start the worker with --tls-cert and --tls-key issued by the coordinator's \
             client CA (`akbench certs --out DIR --worker WORKER_ID` writes \
             DIR/worker-WORKER_ID.pem and .key signed by DIR/ca.pem)",
        ));
    }
    // A token sent is checked even next to a certificate: both must be valid.
    let token = match bearer(request) {
        Some(token) if !tokens.is_open() => Some(check_token(tokens, token)?),
        _ => None,
    };
    if let Some(der) = certificate {
        if token.is_none() && tokens.has_role(Role::Worker) {
            return Err(Status::unauthenticated(
                "failed to open a worker session: this coordinator has worker tokens, so a \
                 worker certificate needs a worker token too; fix: start the worker with a \
                 worker token (--token-file) as well as its certificate",
            ));
        }
        return Ok(WorkerCredential {
            binding: Some(certificate_identity(&der)),
            certificate: Some(certificate_name(&der)),
        });
    }
    if tokens.is_open() {
        return Ok(WorkerCredential::default());
    }
    match token {
        Some(identity) => Ok(WorkerCredential {
            binding: Some(identity),
            certificate: None,
        }),
        None => Err(Status::unauthenticated(
            "failed to open a worker session: missing bearer token; fix: start the worker \
             with a worker token (--token-file) or a worker certificate",
        )),
    }
}

/// The identity of a presented bearer token when it is a worker token.
fn check_token(tokens: &Tokens, token: &str) -> Result<String, Status> {
    match tokens.role_of(token) {
        Some(Role::Worker) => Ok(token_identity(token)),
        Some(_) => Err(Status::permission_denied(
            "failed to open a worker session: it needs a worker token; fix: start the worker \
             with a worker token",
        )),
        None => Err(Status::unauthenticated(
            "failed to open a worker session: unknown bearer token; fix: start the worker \
             with a worker token, or without one when it authenticates with its certificate \
             alone",
        )),
    }
}

/// Binds `worker_id` to `credential` on first use; `Ok(false)` when the id already belongs
/// to another credential.
pub async fn bind(store: &Store, worker_id: &str, credential: &str) -> Result<bool, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(BIND_WORKER_SQL, &[&worker_id, &credential])
        .await
        .map_err(StoreError::from)?;
    Ok(!rows.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_identity_hides_the_token() {
        let id = token_identity("s3cret");
        assert!(id.starts_with("token:") && !id.contains("s3cret"), "{id}");
        assert_eq!(id, token_identity(" s3cret\n"));
        assert_ne!(id, token_identity("other"));
    }

    #[test]
    fn certificate_identity_is_the_common_name() {
        let mut params = rcgen::CertificateParams::new(vec!["w1".to_string()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "worker-1");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(certificate_identity(cert.der()), "cert:CN=worker-1");
        assert!(certificate_identity(b"not der").starts_with("cert:sha256:"));
    }

    #[test]
    fn workers_need_a_worker_credential() {
        let tokens = Tokens::from_pairs([(Role::Worker, "wk"), (Role::Operator, "op")]);
        let req = |t: Option<&str>| {
            let mut r = Request::new(());
            if let Some(t) = t {
                r.metadata_mut()
                    .insert("authorization", format!("Bearer {t}").parse().unwrap());
            }
            r
        };
        let ok = check_worker(&tokens, false, &req(Some("wk"))).unwrap();
        assert_eq!(ok.binding, Some(token_identity("wk")));
        assert_eq!(ok.certificate, None);
        let code = |t, certs| check_worker(&tokens, certs, &req(t)).unwrap_err().code();
        assert_eq!(code(Some("op"), false), tonic::Code::PermissionDenied);
        assert_eq!(code(Some("nope"), false), tonic::Code::Unauthenticated);
        assert_eq!(code(None, false), tonic::Code::Unauthenticated);
        // A worker token is not enough where certificates are required.
        assert_eq!(code(Some("wk"), true), tonic::Code::Unauthenticated);
        let open = Tokens::default();
        assert_eq!(
            check_worker(&open, false, &req(None)).unwrap(),
            WorkerCredential::default()
        );
    }

    #[test]
    fn a_certificate_admits_only_the_worker_id_of_its_name() {
        let named = WorkerCredential {
            binding: Some("cert:CN=w1".into()),
            certificate: Some(Some("w1".into())),
        };
        assert!(named.check_worker_id("w1").is_ok());
        let e = named.check_worker_id("w2").unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        assert!(
            e.message().contains("\"w1\"") && e.message().contains("\"w2\""),
            "{}",
            e.message()
        );
        let nameless = WorkerCredential {
            binding: Some("cert:sha256:00".into()),
            certificate: Some(None),
        };
        let e = nameless.check_worker_id("w1").unwrap_err();
        assert!(e.message().contains("no common name"), "{}", e.message());
        let token = WorkerCredential {
            binding: Some(token_identity("wk")),
            certificate: None,
        };
        assert!(token.check_worker_id("anything").is_ok());
    }
}
