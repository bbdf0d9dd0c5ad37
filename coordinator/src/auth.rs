//! Access: bearer tokens with three roles.
//!
//! - `worker`: may open `Workers.Session` only (checked, with client certificates and the
//!   worker-id binding, by [`crate::worker_identity`]).
//! - `viewer`: may read the control API (`GetRun`, `ListRuns`, `DiffRuns`, `GetStatus`,
//!   `WatchStatus`, `Reconcile`, `ReconcileStream`, `FetchRecords`, `ListTrialRows`) and `/api/*`.
//! - `operator`: may do everything on the control API and `/api/*`.
//!
//! Tokens come from token files (`--token-file`, repeatable: one `role:token` per line;
//! blank lines and lines starting with `#` are ignored) and from the environment variables
//! `AKBENCH_OPERATOR_TOKEN`, `AKBENCH_VIEWER_TOKEN` and `AKBENCH_WORKER_TOKEN`. Only sha256
//! digests of the tokens are kept, and a presented token is compared with every one of them
//! in constant time (`subtle`). With no token configured at all the coordinator is open
//! (local mode): every caller is treated as an operator, and [`Tokens::is_open`] lets the
//! server log a warning. A connection that presented a client certificate (a worker's) may
//! not call `Control`, whatever its token.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest as _, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};
use tonic::metadata::MetadataMap;
use tonic::{Request, Status};

/// The environment variables read by [`Tokens::load`], with their roles.
pub const TOKEN_ENV: [(&str, Role); 3] = [
    ("AKBENCH_OPERATOR_TOKEN", Role::Operator),
    ("AKBENCH_VIEWER_TOKEN", Role::Viewer),
    ("AKBENCH_WORKER_TOKEN", Role::Worker),
];

/// What a token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Opens worker sessions.
    Worker,
    /// Does everything on the control API.
    Operator,
    /// Reads the control API.
    Viewer,
}

impl Role {
    fn code(self) -> u8 {
        match self {
            Role::Worker => 1,
            Role::Operator => 2,
            Role::Viewer => 3,
        }
    }

    fn from_code(code: u8) -> Option<Role> {
        match code {
            1 => Some(Role::Worker),
            2 => Some(Role::Operator),
            3 => Some(Role::Viewer),
            _ => None,
        }
    }

    /// Parses `worker`, `operator` or `viewer`.
    pub fn parse(s: &str) -> Option<Role> {
        match s.trim() {
            "worker" => Some(Role::Worker),
            "operator" => Some(Role::Operator),
            "viewer" => Some(Role::Viewer),
            _ => None,
        }
    }
}

/// A token file or variable could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The file cannot be read.
    #[error("failed to read token file {}: {message}; fix: check --token-file", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        message: String,
    },
    /// A line is not `role:token`.
    #[error("failed to parse token file {} line {line}: {problem}; fix: write one `role:token` per line, role worker, operator or viewer", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong (never the token).
        problem: String,
    },
}

/// The configured tokens (digests only).
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Arc<Vec<(u8, [u8; 32])>>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("count", &self.entries.len())
            .finish()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Parses a token file's text (`role:token` per line).
pub fn parse_token_file(text: &str, path: &Path) -> Result<Vec<(Role, String)>, AuthError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let syntax = |problem: &str| AuthError::Syntax {
            path: path.to_path_buf(),
            line: i + 1,
            problem: problem.to_string(),
        };
        let (role, token) = line.split_once(':').ok_or_else(|| syntax("no `:`"))?;
        let role = Role::parse(role).ok_or_else(|| syntax("unknown role"))?;
        let token = token.trim();
        if token.is_empty() {
            return Err(syntax("empty token"));
        }
        out.push((role, token.to_string()));
    }
    Ok(out)
}

impl Tokens {
    /// Tokens from explicit pairs.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (Role, &'a str)>) -> Tokens {
        Tokens {
            entries: Arc::new(
                pairs
                    .into_iter()
                    .filter(|(_, t)| !t.is_empty())
                    .map(|(r, t)| (r.code(), digest(t)))
                    .collect(),
            ),
        }
    }

    /// Tokens from `files` and from the variables of [`TOKEN_ENV`] read through `env`.
    pub fn load(
        files: &[PathBuf],
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Tokens, AuthError> {
        let mut pairs: Vec<(Role, String)> = Vec::new();
        for path in files {
            let text = akbench_core::bounded_read::ReadKind::Secret
                .read_text(path, akbench_core::bounded_read::Links::Follow)
                .map_err(|e| AuthError::Read {
                    path: path.clone(),
                    message: format!("it {e}"),
                })?;
            pairs.extend(parse_token_file(&text, path)?);
        }
        for (name, role) in TOKEN_ENV {
            if let Some(token) = env(name).filter(|t| !t.trim().is_empty()) {
                pairs.push((role, token.trim().to_string()));
            }
        }
        Ok(Tokens::from_pairs(
            pairs.iter().map(|(r, t)| (*r, t.as_str())),
        ))
    }

    /// True when a token of `role` is configured.
    pub fn has_role(&self, role: Role) -> bool {
        self.entries.iter().any(|(code, _)| *code == role.code())
    }

    /// True when no token is configured: the coordinator is open (local mode).
    pub fn is_open(&self) -> bool {
        self.entries.is_empty()
    }

    /// The role of `token`, compared in constant time with every configured token.
    pub fn role_of(&self, token: &str) -> Option<Role> {
        let presented = digest(token);
        let mut code = 0u8;
        for (role, known) in self.entries.iter() {
            let equal = presented.ct_eq(known);
            code = u8::conditional_select(&code, role, equal);
        }
        Role::from_code(code)
    }

    /// The caller's role from an `authorization: Bearer <token>` value; `Ok(Operator)` when
    /// open; `Err` (never naming the token) when missing or unknown.
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Role, &'static str> {
        if self.is_open() {
            return Ok(Role::Operator);
        }
        let value = authorization.ok_or("missing bearer token")?;
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .ok_or("the authorization header is not `Bearer <token>`")?;
        self.role_of(token.trim()).ok_or("unknown bearer token")
    }

    fn authenticate_metadata(&self, metadata: &MetadataMap) -> Result<Role, Status> {
        let value = metadata
            .get("authorization")
            .map(|v| v.to_str().unwrap_or(""));
        self.authenticate(value).map_err(|why| {
            Status::unauthenticated(format!(
                "failed to authenticate: {why}; fix: send `authorization: Bearer <token>` with an operator or viewer token"
            ))
        })
    }
}

/// The role of the caller, put in the request extensions by [`control_interceptor`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller(pub Role);

/// Refuses a `Control` call made over a connection that presented a client certificate:
/// client certificates are worker credentials.
pub fn refuse_worker_certificate<T>(request: &Request<T>) -> Result<(), Status> {
    match request.peer_certs() {
        Some(certs) if !certs.is_empty() => Err(Status::permission_denied(
            "failed to authorize: a worker certificate may not call the control API; fix: \
             call it without a client certificate, with an operator or viewer token",
        )),
        _ => Ok(()),
    }
}

/// The interceptor of the `Control` service: no or an unknown token is `UNAUTHENTICATED`, a
/// worker token is `PERMISSION_DENIED`; otherwise the role goes in the extensions for
/// [`require_operator`].
pub fn control_interceptor(
    tokens: Tokens,
) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |mut request: Request<()>| {
        refuse_worker_certificate(&request)?;
        let role = tokens.authenticate_metadata(request.metadata())?;
        if role == Role::Worker {
            return Err(Status::permission_denied(
                "failed to authorize: a worker token may not call the control API; fix: use an operator or viewer token",
            ));
        }
        request.extensions_mut().insert(Caller(role));
        Ok(request)
    }
}

/// Refuses with `PERMISSION_DENIED` unless the caller is an operator (write calls: SubmitPlan,
/// StartRun, ResumeRun, CancelRun). A request that did not pass the interceptor is refused.
pub fn require_operator<T>(request: &Request<T>, action: &str) -> Result<(), Status> {
    match request.extensions().get::<Caller>() {
        Some(Caller(Role::Operator)) => Ok(()),
        _ => Err(Status::permission_denied(format!(
            "failed to {action}: it needs an operator token; fix: use an operator token (viewers may only read)"
        ))),
    }
}

/// The cookie that carries a browser's token (set by the HTTP listener's `/login`).
pub const COOKIE: &str = "akbench_token";

/// The token in a `Cookie` header's [`COOKIE`], when there is one.
pub fn token_from_cookie(header: &str) -> Option<&str> {
    header.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name.trim() == COOKIE && !value.is_empty()).then_some(value.trim())
    })
}

/// The check of the HTTP listener's pages and `/api/*`: a viewer or operator token, or an
/// open coordinator.
pub fn authorize_http(tokens: &Tokens, authorization: Option<&str>) -> Result<Role, &'static str> {
    match tokens.authenticate(authorization)? {
        Role::Worker => Err("a worker token may not read the API"),
        role => Ok(role),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_cookie_is_found_among_others() {
        let cases = [
            ("akbench_token=abc", Some("abc")),
            ("a=1; akbench_token=abc; b=2", Some("abc")),
            ("akbench_token=", None),
            ("x_akbench_token=abc", None),
            ("a=1", None),
            ("", None),
        ];
        for (header, want) in cases {
            assert_eq!(token_from_cookie(header), want, "{header}");
        }
    }

    #[test]
    fn parses_token_files_and_rejects_bad_lines() {
        let p = Path::new("t");
        let pairs = parse_token_file("# c\n\noperator: op-1\nviewer:v\n", p).unwrap();
        assert_eq!(
            pairs,
            vec![(Role::Operator, "op-1".into()), (Role::Viewer, "v".into())]
        );
        let e = parse_token_file("admin:x", p).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("unknown role"), "{e}");
        assert!(parse_token_file("novalue", p).is_err());
        assert!(parse_token_file("viewer:", p).is_err());
    }

    #[test]
    fn roles_by_token_and_open_mode() {
        let t = Tokens::from_pairs([(Role::Operator, "op"), (Role::Worker, "wk")]);
        assert_eq!(t.role_of("op"), Some(Role::Operator));
        assert_eq!(t.role_of("wk"), Some(Role::Worker));
        assert_eq!(t.role_of("o"), None);
        assert_eq!(t.authenticate(Some("Bearer op")), Ok(Role::Operator));
        assert!(t.authenticate(None).is_err());
        assert!(t.authenticate(Some("op")).is_err());
        assert!(authorize_http(&t, Some("Bearer wk")).is_err());
        assert!(t.has_role(Role::Worker) && !t.has_role(Role::Viewer));
        let open = Tokens::default();
        assert!(open.is_open());
        assert_eq!(open.authenticate(None), Ok(Role::Operator));
    }

    #[test]
    fn environment_variables_add_tokens() {
        let t = Tokens::load(&[], |name| {
            (name == "AKBENCH_VIEWER_TOKEN").then(|| "view".to_string())
        })
        .unwrap();
        assert_eq!(t.role_of("view"), Some(Role::Viewer));
        assert!(!t.is_open());
    }
}
