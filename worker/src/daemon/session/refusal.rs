//! Why a session did not open (or ended before its `Welcome`): the connection error or the
//! coordinator's status, classified ([`akbench_core::identity::Refused`]) where it arrives,
//! so that the session's state machine decides on a plain value.

use akbench_core::identity::{certificate_refusal, CertificateRefusal, Refused};
use std::time::Duration;

/// How long the read-only handshake that tells a refused certificate from a closed
/// connection waits for the coordinator's alert ([`crate::dial_probe`]).
const CERTIFICATE_PROBE_WAIT: Duration = Duration::from_secs(3);

/// Why a session did not open (or ended before its `Welcome`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::daemon) struct Refusal {
    /// What kind of refusal (`Other` for a transient failure).
    pub why: Refused,
    /// What to log: the error and, for a certificate, the fix.
    pub message: String,
}

impl Refusal {
    /// A failed connection: transient, unless its handshake failed over a certificate.
    pub fn transient(message: String) -> Self {
        match certificate_refusal(&message) {
            Some(side) => Self::certificate(side, message),
            None => Self {
                why: Refused::Other,
                message,
            },
        }
    }

    /// A failure that did not say why, over TLS: a refused client certificate can read as
    /// a closed connection (the alert races the first request), so the handshake is made
    /// again, reading only ([`crate::dial_probe`]); a certificate refusal it sees replaces
    /// this failure.
    pub async fn checked_for_certificate(
        self,
        url: &url::Url,
        tls: &crate::dial::TlsOptions,
    ) -> Self {
        match crate::dial_probe::certificate_verdict(url, tls, CERTIFICATE_PROBE_WAIT).await {
            crate::dial_probe::Verdict::TlsError(text) => match certificate_refusal(&text) {
                Some(side) => Self::certificate(side, text),
                None => self,
            },
            crate::dial_probe::Verdict::NothingLearned => self,
        }
    }

    fn certificate(side: CertificateRefusal, message: String) -> Self {
        let fix = match side {
            CertificateRefusal::Ours => {
                "the coordinator refused this worker's client certificate; fix: pass \
                 --tls-cert/--tls-key issued by the CA the coordinator's --client-ca names \
                 (`akbench certs --out DIR --worker WORKER_ID`), not expired"
            }
            CertificateRefusal::Theirs => {
                "this worker did not accept the coordinator's certificate; fix: pass the CA \
                 that signed it with --ca-file, and check that it is valid for the \
                 coordinator URL's host and not expired"
            }
        };
        Self {
            why: Refused::Certificate,
            message: format!("the TLS handshake failed: {message}; {fix}"),
        }
    }

    pub fn of(status: &tonic::Status) -> Self {
        // A transport error's cause (the TLS alert) is only in its sources.
        let mut text = format!("{:?}: {}", status.code(), status.message());
        let mut source = std::error::Error::source(status);
        while let Some(s) = source {
            let s_text = s.to_string();
            if !text.contains(&s_text) {
                text = format!("{text}: {s_text}");
            }
            source = s.source();
        }
        let why = match status.code() {
            tonic::Code::Unauthenticated => Refused::Unauthenticated,
            tonic::Code::PermissionDenied => Refused::PermissionDenied,
            tonic::Code::AlreadyExists => Refused::IdHeld,
            _ => return Self::transient(text),
        };
        Self { why, message: text }
    }
}
