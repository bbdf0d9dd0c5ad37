//! Provider failures read from an agent's own event stream, and the watch that decides when
//! to stop an agent whose model provider keeps failing.
//!
//! An outage, a 5xx or a 429 of the model provider is an infrastructure fact about the
//! provider route, never the agent's failure; a refused credential (401/403) is a
//! configuration fact. The parsers (`claude_code`, `codex`) report the provider failure the
//! stream ends with (one the agent recovered from is dropped) as a [`ProviderError`]; the
//! orchestrator maps it to `infrastructure_error` (cause `provider: ...`) or
//! `invalid_configuration`.
//!
//! Both CLIs retry on their own for minutes (claude-code ten times with growing backoff, even
//! on 401; codex forever on a refused connection), so the worker polls the stream while the
//! agent runs and [`watch`] says when to stop it: at once for a refused credential, after a
//! grace for the rest.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What kind of provider failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderErrorKind {
    /// The provider could not be reached (connection refused, reset, DNS, timeout).
    Unreachable,
    /// HTTP 5xx (or an "overloaded" answer).
    ServerError,
    /// HTTP 429.
    RateLimited,
    /// HTTP 401 or 403: the credential was refused.
    Unauthorized,
}

impl ProviderErrorKind {
    /// The kind of an HTTP status, when it is a provider failure.
    pub fn of_status(status: u16) -> Option<ProviderErrorKind> {
        match status {
            401 | 403 => Some(ProviderErrorKind::Unauthorized),
            429 => Some(ProviderErrorKind::RateLimited),
            500..=599 => Some(ProviderErrorKind::ServerError),
            _ => None,
        }
    }

    /// True when it is the configuration's fault (the credential), not the infrastructure's.
    pub fn is_configuration(self) -> bool {
        self == ProviderErrorKind::Unauthorized
    }

    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderErrorKind::Unreachable => "unreachable",
            ProviderErrorKind::ServerError => "server_error",
            ProviderErrorKind::RateLimited => "rate_limited",
            ProviderErrorKind::Unauthorized => "unauthorized",
        }
    }
}

/// A provider failure the agent did not recover from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderError {
    /// What failed.
    pub kind: ProviderErrorKind,
    /// The HTTP status, when the agent reported one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The agent's own message about it.
    pub message: String,
    /// Failed requests (retries included) seen in a row, at least 1.
    pub failures: u32,
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            ProviderErrorKind::Unreachable => "unreachable",
            ProviderErrorKind::ServerError => "server error",
            ProviderErrorKind::RateLimited => "rate limited",
            ProviderErrorKind::Unauthorized => "credential refused",
        };
        match self.status {
            Some(s) => write!(f, "{what} (HTTP {s})")?,
            None => f.write_str(what)?,
        }
        write!(
            f,
            " after {} failed request{}: {}",
            self.failures,
            if self.failures == 1 { "" } else { "s" },
            self.message
        )
    }
}

/// Tracks the failure a stream is in: failures in a row, reset by a model response.
#[derive(Debug, Default)]
pub(crate) struct FailureRun {
    current: Option<ProviderError>,
}

impl FailureRun {
    /// One more failed request; a later one replaces the kind, status and message.
    pub(crate) fn fail(&mut self, kind: ProviderErrorKind, status: Option<u16>, message: String) {
        let failures = self.current.as_ref().map_or(0, |c| c.failures) + 1;
        self.current = Some(ProviderError {
            kind,
            status,
            message,
            failures,
        });
    }

    /// Like [`fail`](Self::fail) but not counted as another request (the agent's final
    /// report of the failure it already retried): keeps the count, fills in what was missing.
    pub(crate) fn settle(&mut self, kind: ProviderErrorKind, status: Option<u16>, message: String) {
        match &mut self.current {
            Some(c) => {
                c.kind = kind;
                c.status = status.or(c.status);
                if !message.is_empty() {
                    c.message = message;
                }
            }
            None => self.fail(kind, status, message),
        }
    }

    /// The provider answered: the failure is over.
    pub(crate) fn recover(&mut self) {
        self.current = None;
    }

    pub(crate) fn finish(self) -> Option<ProviderError> {
        self.current
    }
}

/// What the worker does with a running agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// Let it run.
    Continue,
    /// Stop it: the provider has failed past the grace (or refused the credential).
    Stop,
}

/// The watch over a running agent: `failing_since_ms` is when the current failure was first
/// seen (the caller keeps it, resetting it when the stream recovers), `now_ms` the clock.
/// A refused credential stops at once: retrying cannot fix it.
pub fn watch(
    current: Option<&ProviderError>,
    failing_since_ms: Option<u64>,
    now_ms: u64,
    grace_ms: u64,
) -> Watch {
    match (current, failing_since_ms) {
        (Some(e), _) if e.kind.is_configuration() => Watch::Stop,
        (Some(_), Some(since)) if now_ms.saturating_sub(since) >= grace_ms => Watch::Stop,
        _ => Watch::Continue,
    }
}

/// The first HTTP status (100-599) written after the word `status` in `text`.
pub(crate) fn status_in(text: &str) -> Option<u16> {
    let lower = text.to_ascii_lowercase();
    let mut rest = lower.as_str();
    while let Some(i) = rest.find("status") {
        rest = &rest[i + "status".len()..];
        let digits: String = rest
            .trim_start_matches([':', ' ', '='])
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if let Ok(n) = digits.parse::<u16>() {
            if (100..600).contains(&n) && digits.len() == 3 {
                return Some(n);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: ProviderErrorKind) -> ProviderError {
        ProviderError {
            kind,
            status: None,
            message: "m".into(),
            failures: 1,
        }
    }

    #[test]
    fn watch_table() {
        use ProviderErrorKind::*;
        let cases = [
            (None, None, 100_000, Watch::Continue),
            (Some(err(ServerError)), Some(0), 19_999, Watch::Continue),
            (Some(err(ServerError)), Some(0), 20_000, Watch::Stop),
            (Some(err(RateLimited)), Some(5_000), 24_999, Watch::Continue),
            (Some(err(Unreachable)), Some(5_000), 25_000, Watch::Stop),
            (Some(err(Unauthorized)), Some(5_000), 5_000, Watch::Stop),
            // A failure with no start time yet (first seen now) keeps running.
            (Some(err(ServerError)), None, 50_000, Watch::Continue),
        ];
        for (current, since, now, want) in cases {
            assert_eq!(
                watch(current.as_ref(), since, now, 20_000),
                want,
                "{current:?} {since:?} {now}"
            );
        }
    }

    #[test]
    fn status_in_table() {
        let cases = [
            ("unexpected status 401 Unauthorized: invalid", Some(401)),
            ("exceeded retry limit, last status: 429 Too Many", Some(429)),
            ("status=503", Some(503)),
            ("no status here", None),
            ("status 4011", None),
            ("status 42", None),
            ("Status: 500 then status 429", Some(500)),
        ];
        for (text, want) in cases {
            assert_eq!(status_in(text), want, "{text}");
        }
    }

    #[test]
    fn kinds_of_statuses() {
        use ProviderErrorKind::*;
        for (s, k) in [
            (401, Some(Unauthorized)),
            (403, Some(Unauthorized)),
            (429, Some(RateLimited)),
            (500, Some(ServerError)),
            (529, Some(ServerError)),
            (400, None),
            (404, None),
            (200, None),
        ] {
            assert_eq!(ProviderErrorKind::of_status(s), k, "{s}");
        }
    }

    #[test]
    fn failure_run_counts_and_recovers() {
        use ProviderErrorKind::*;
        let mut r = FailureRun::default();
        r.fail(ServerError, Some(500), "a".into());
        r.fail(RateLimited, Some(429), "b".into());
        r.settle(RateLimited, None, "final".into());
        let e = r.finish().unwrap();
        assert_eq!((e.kind, e.status, e.failures), (RateLimited, Some(429), 2));
        assert_eq!(e.message, "final");
        assert_eq!(
            e.to_string(),
            "rate limited (HTTP 429) after 2 failed requests: final"
        );
        let mut r = FailureRun::default();
        r.fail(ServerError, Some(500), "a".into());
        r.recover();
        assert_eq!(r.finish(), None);
    }
}
