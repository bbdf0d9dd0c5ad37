//! Who may use a worker id, and what a worker does when the coordinator refuses it: the
//! rules the coordinator's `Workers` service and the worker daemon apply (pure functions;
//! the I/O is theirs).
//!
//! - [`may_open_session`]: a worker id is held by one live session. A new session for an id
//!   whose session is alive (heard within the lease TTL) is refused, unless it comes from
//!   the same worker process (the same non-empty instance id: its own stream broke and it
//!   reconnects); a holder that is silent past the TTL is taken over.
//! - [`certificate_admits`]: a worker certificate's name must equal the worker id, or be a
//!   pool name `pool:PREFIX`, which admits the ids that start with PREFIX and are longer (for
//!   replicas whose ids are made at start: Kubernetes pod names, compose's container ids).
//!   Two replicas can never hold one id at once ([`may_open_session`]).
//! - [`after_refusal`]: how a worker reacts to a refused session (an authentication error or
//!   a held id ends it after a short bounded retry, with its own exit code; anything else is
//!   retried for ever).

/// What the coordinator knows about the session that holds a worker id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder<'a> {
    /// Heard from within the lease TTL (and not found silent since).
    pub alive: bool,
    /// The holder's instance id (`Hello.instance_id`; empty: unknown).
    pub instance: &'a str,
}

/// The decision about a new session for a worker id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionClaim {
    /// No session holds the id: register it.
    Free,
    /// The holder is silent past the TTL: the new session takes the id (the old one ends).
    TakeOverSilent,
    /// The same worker process reconnects: its new session replaces its old one at once.
    TakeOverOwn,
    /// Another live session holds the id: refuse the new one (`ALREADY_EXISTS`).
    Refuse,
}

/// Whether a session of instance `instance` may hold a worker id now held by `holder`
/// (see the module doc). An empty instance id never matches another one.
pub fn may_open_session(holder: Option<Holder<'_>>, instance: &str) -> SessionClaim {
    match holder {
        None => SessionClaim::Free,
        Some(h) if !instance.is_empty() && h.instance == instance => SessionClaim::TakeOverOwn,
        Some(h) if !h.alive => SessionClaim::TakeOverSilent,
        Some(_) => SessionClaim::Refuse,
    }
}

/// The common-name prefix of a pool certificate (`pool:PREFIX`).
pub const POOL_PREFIX: &str = "pool:";

/// Whether a client certificate named `certificate_name` (its subject's common name; `None`
/// when it has none) may open a session as `worker_id`: when the name equals the id, or the
/// name is `pool:PREFIX` and the id starts with PREFIX and is longer than it.
pub fn certificate_admits(certificate_name: Option<&str>, worker_id: &str) -> bool {
    let Some(name) = certificate_name.filter(|n| !n.is_empty()) else {
        return false;
    };
    match name.strip_prefix(POOL_PREFIX) {
        Some(prefix) => worker_id.len() > prefix.len() && worker_id.starts_with(prefix),
        None => name == worker_id,
    }
}

/// The longest worker id a coordinator accepts, in bytes: the worker refuses a longer
/// `--worker-id` at start instead of being refused by every session.
pub const MAX_WORKER_ID_BYTES: usize = 200;

/// Why the coordinator refused a worker's session, as the worker sees it (the gRPC status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `UNAUTHENTICATED`: no, an unknown or a missing credential.
    Unauthenticated,
    /// `PERMISSION_DENIED`: the credential may not use this worker id (or is not a worker's).
    PermissionDenied,
    /// `ALREADY_EXISTS`: another live session holds the worker id.
    IdHeld,
    /// The TLS handshake failed over a certificate ([`certificate_refusal`]): the
    /// coordinator refused the worker's client certificate (another CA, expired, or none
    /// where one is required), or the worker could not verify the coordinator's.
    Certificate,
    /// Anything else (unreachable, unavailable, a broken stream): transient.
    Other,
}

/// How many sessions in a row may be refused for the same lasting reason before the worker
/// gives up (the first attempt and two retries, with the reconnect backoff between).
pub const REFUSALS_BEFORE_EXIT: u32 = 3;

/// Exit code of `akbench-worker` when the coordinator keeps refusing its credential
/// (`UNAUTHENTICATED` or `PERMISSION_DENIED`).
pub const EXIT_AUTH_REFUSED: i32 = 4;
/// Exit code of `akbench-worker` when another live session keeps holding its worker id.
pub const EXIT_ID_HELD: i32 = 5;
/// Exit code of `akbench-worker` when the TLS handshake keeps failing over a certificate
/// (its own refused by the coordinator, or the coordinator's not verified).
pub const EXIT_CERT_REFUSED: i32 = 6;

/// Which side's certificate a failed TLS handshake was about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertificateRefusal {
    /// The coordinator refused the worker's client certificate (its alert: unknown CA, bad,
    /// expired, revoked or required certificate).
    Ours,
    /// The worker did not accept the coordinator's certificate (not signed by `--ca-file`
    /// or a system root, expired, issued for another name).
    Theirs,
}

/// Whether a connection error's text (the error and its sources) is a TLS handshake that
/// failed over a certificate, and whose: rustls' alert names (`received fatal alert:
/// UnknownCA`, `BadCertificate`, `CertificateRequired`, ...) when the coordinator refused
/// ours, `invalid peer certificate` when we refused theirs. Anything else (refused,
/// reset, timed out) is not: it is retried.
pub fn certificate_refusal(error_text: &str) -> Option<CertificateRefusal> {
    let t = error_text.to_ascii_lowercase().replace([' ', '_'], "");
    if t.contains("invalidpeercertificate") {
        return Some(CertificateRefusal::Theirs);
    }
    const ALERTS: [&str; 7] = [
        "unknownca",
        "badcertificate",
        "certificaterequired",
        "certificateexpired",
        "certificaterevoked",
        "certificateunknown",
        "unsupportedcertificate",
    ];
    (t.contains("alert") && ALERTS.iter().any(|a| t.contains(a)))
        .then_some(CertificateRefusal::Ours)
}

/// What a worker does after a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterRefusal {
    /// Reconnect after the usual backoff.
    Retry,
    /// Stop with this exit code.
    Exit(i32),
}

/// What a worker does after its `in_a_row`-th consecutive refusal (1-based) for `why`:
/// lasting refusals end it after [`REFUSALS_BEFORE_EXIT`], transient ones are retried.
pub fn after_refusal(why: Refused, in_a_row: u32) -> AfterRefusal {
    let code = match why {
        Refused::Unauthenticated | Refused::PermissionDenied => EXIT_AUTH_REFUSED,
        Refused::IdHeld => EXIT_ID_HELD,
        Refused::Certificate => EXIT_CERT_REFUSED,
        Refused::Other => return AfterRefusal::Retry,
    };
    if in_a_row >= REFUSALS_BEFORE_EXIT {
        AfterRefusal::Exit(code)
    } else {
        AfterRefusal::Retry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_live_session_holds_a_worker_id() {
        let h = |alive, instance| Some(Holder { alive, instance });
        let cases = [
            (None, "a", SessionClaim::Free),
            (None, "", SessionClaim::Free),
            (h(true, "a"), "a", SessionClaim::TakeOverOwn),
            (h(false, "a"), "a", SessionClaim::TakeOverOwn),
            (h(true, "a"), "b", SessionClaim::Refuse),
            (h(true, ""), "b", SessionClaim::Refuse),
            (h(true, "a"), "", SessionClaim::Refuse),
            (h(true, ""), "", SessionClaim::Refuse),
            (h(false, "a"), "b", SessionClaim::TakeOverSilent),
            (h(false, ""), "", SessionClaim::TakeOverSilent),
        ];
        for (holder, instance, want) in cases {
            assert_eq!(
                may_open_session(holder, instance),
                want,
                "{holder:?} {instance:?}"
            );
        }
    }

    #[test]
    fn a_certificate_admits_only_its_own_name() {
        let cases = [
            (Some("w1"), "w1", true),
            (Some("w1"), "w2", false),
            (Some("w1"), "w10", false),
            (Some("w1"), "W1", false),
            (Some(""), "", false),
            (None, "w1", false),
            // Pools: ids that start with the prefix and are longer than it.
            (Some("pool:akbench-worker-"), "akbench-worker-7d9f-x2", true),
            (Some("pool:akbench-worker-"), "akbench-worker-", false),
            (Some("pool:akbench-worker-"), "other-worker-1", false),
            (Some("pool:akbench-worker-"), "akbench-Worker-1", false),
            (Some("pool:"), "3f2a9c1b-17", true),
            (Some("pool:"), "", false),
            (Some("pool:w"), "pool:w1", false),
        ];
        for (name, id, want) in cases {
            assert_eq!(certificate_admits(name, id), want, "{name:?} {id:?}");
        }
    }

    #[test]
    fn lasting_refusals_end_the_worker_after_a_bounded_retry() {
        use AfterRefusal::{Exit, Retry};
        let cases = [
            (Refused::Unauthenticated, 1, Retry),
            (Refused::Unauthenticated, 2, Retry),
            (Refused::Unauthenticated, 3, Exit(EXIT_AUTH_REFUSED)),
            (Refused::PermissionDenied, 1, Retry),
            (Refused::PermissionDenied, 3, Exit(EXIT_AUTH_REFUSED)),
            (Refused::PermissionDenied, 9, Exit(EXIT_AUTH_REFUSED)),
            (Refused::IdHeld, 2, Retry),
            (Refused::IdHeld, 3, Exit(EXIT_ID_HELD)),
            (Refused::Certificate, 2, Retry),
            (Refused::Certificate, 3, Exit(EXIT_CERT_REFUSED)),
            (Refused::Other, 1, Retry),
            (Refused::Other, 1000, Retry),
        ];
        for (why, n, want) in cases {
            assert_eq!(after_refusal(why, n), want, "{why:?} {n}");
        }
    }

    #[test]
    fn a_handshake_failed_over_a_certificate_is_told_from_a_failed_connection() {
        use CertificateRefusal::{Ours, Theirs};
        let cases = [
            (
                "transport error: received fatal alert: UnknownCA",
                Some(Ours),
            ),
            (
                "tls handshake eof: received fatal alert: BadCertificate",
                Some(Ours),
            ),
            ("received fatal alert: CertificateRequired", Some(Ours)),
            ("received fatal alert: CertificateExpired", Some(Ours)),
            ("invalid peer certificate: UnknownIssuer", Some(Theirs)),
            ("invalid peer certificate: Expired", Some(Theirs)),
            ("invalid peer certificate: NotValidForName", Some(Theirs)),
            ("tcp connect error: Connection refused (os error 111)", None),
            ("transport error: connection reset by peer", None),
            ("received fatal alert: HandshakeFailure", None),
            ("the certificate file was not found", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(certificate_refusal(text), want, "{text}");
        }
    }
}
