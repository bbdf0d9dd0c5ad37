//! The HTTP side of the coordinator (axum, same process as gRPC):
//!
//! - `GET /api/runs/{run}/status`: the [`RunStatus`] projection as JSON (run UUID or key;
//!   404 when unknown). Rates over nothing are `null`.
//! - the viewer's pages and API ([`akbench_viewer::server`], the same as `akbench view`):
//!   `/` (runs), `/runs/{run}` (progress, ETA, workers, paused routes, live through
//!   server-sent events), `/trials/{trial}` (attempts, timeline, evaluator results; logs and
//!   diff when `--artifacts` names the workers' artifact folder), `/api/runs...`, over
//!   [`StoreBackend`]. Every route is a GET: nothing in the UI writes.
//! - `GET /runs/{run}/status`: the projection as a plain server-side HTML page that refreshes
//!   itself every 2 seconds (no JavaScript); rates over nothing read "n/a".
//! - `GET /login`: a form for a browser to present its token once; `GET /login?token=T`
//!   checks it and stores it in an `HttpOnly`, `SameSite=Strict` cookie (`Secure` with TLS).
//! - `GET /metrics`: Prometheus text ([`Metrics`]); the state gauges are read from the
//!   database first (when that fails the last values are served and a warning logged).
//! - `GET /healthz`: the process is up. `GET /readyz`: the database answers and carries every
//!   migration this binary knows.
//!
//! Everything but health, metrics, `/login` and `/assets/*` needs a viewer or operator token
//! (401 otherwise), as `Authorization: Bearer` or as the `akbench_token` cookie, unless the
//! coordinator is open (no token configured).

use std::fmt::Write as _;
use std::sync::Arc;

use akbench_core::html::esc;
use akbench_core::rates::Pct;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::auth::{authorize_http, token_from_cookie, Tokens, COOKIE};
use crate::error::ControlError;
use crate::metrics::Metrics;
use crate::status::{run_status, RunStatus, StatusOptions};
use crate::store::{Store, MIGRATIONS};
use crate::view_source::StoreBackend;
use akbench_viewer::source::Coordinated;

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct HttpState {
    /// The database.
    pub store: Store,
    /// Bearer tokens.
    pub tokens: Tokens,
    /// Process metrics.
    pub metrics: Arc<Metrics>,
    /// Status windows.
    pub status: StatusOptions,
    /// The workers' artifact folder, for the viewer's trial pages.
    pub artifacts: Option<std::path::PathBuf>,
    /// The listener speaks TLS (the login cookie is then `Secure`).
    pub tls: bool,
}

/// How often a run page's event stream re-reads the run's status.
pub const VIEW_POLL: std::time::Duration = std::time::Duration::from_millis(1000);

/// The router of every route above.
pub fn router(state: HttpState) -> Router {
    let source = std::sync::Arc::new(Coordinated::new(StoreBackend {
        store: state.store.clone(),
        status: state.status,
        artifacts: state.artifacts.clone(),
        specs: Default::default(),
    }));
    let guarded = Router::new()
        .route("/api/runs/{run}/status", get(status_json))
        .route("/runs/{run}/status", get(status_page))
        .with_state(state.clone())
        .merge(akbench_viewer::server::router(source, VIEW_POLL))
        .route_layer(middleware::from_fn_with_state(state.clone(), bearer));
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/login", get(login))
        .with_state(state)
        .merge(guarded)
        .merge(akbench_viewer::server::assets())
}

async fn bearer(State(state): State<HttpState>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let value = match headers.get(header::AUTHORIZATION) {
        Some(v) => Some(v.to_str().unwrap_or("").to_string()),
        None => headers
            .get_all(header::COOKIE)
            .iter()
            .find_map(|c| token_from_cookie(c.to_str().unwrap_or("")))
            .map(|t| format!("Bearer {t}")),
    };
    match authorize_http(&state.tokens, value.as_deref()) {
        Ok(_) => next.run(request).await,
        Err(why) => unauthorized(why),
    }
}

fn unauthorized(why: &str) -> Response {
    let mut r = (
        StatusCode::UNAUTHORIZED,
        format!(
            "failed to authenticate: {why}; fix: send `Authorization: Bearer <token>` with a \
             viewer or operator token (in a browser: open /login)\n"
        ),
    )
        .into_response();
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

/// `?token=` of `/login`.
#[derive(Debug, serde::Deserialize)]
struct Login {
    #[serde(default)]
    token: Option<String>,
}

/// A browser presents its token once; it comes back as a cookie on every page.
async fn login(State(state): State<HttpState>, Query(q): Query<Login>) -> Response {
    use akbench_viewer::html::page;
    use akbench_viewer::server::html;
    let form = |note: &str| {
        page(
            "sign in",
            &[],
            &format!(
                "<h1>Sign in</h1><p>{note}</p><form method=\"get\" action=\"/login\">\
                 <input type=\"password\" name=\"token\" placeholder=\"viewer or operator token\" \
                 autocomplete=\"off\"><button>sign in</button></form>"
            ),
        )
    };
    let Some(token) = q.token.filter(|t| !t.is_empty()) else {
        return html(
            StatusCode::OK,
            form("The viewer reads this coordinator's runs with a viewer or operator token."),
        );
    };
    let ok = token
        .bytes()
        .all(|b| b.is_ascii_graphic() && b != b';' && b != b',')
        && authorize_http(&state.tokens, Some(&format!("Bearer {token}"))).is_ok();
    if !ok {
        return html(
            StatusCode::UNAUTHORIZED,
            form("That token is not a viewer or operator token of this coordinator; try again."),
        );
    }
    let cookie = format!(
        "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=604800{}",
        if state.tls { "; Secure" } else { "" }
    );
    let mut r = (StatusCode::SEE_OTHER, "signed in\n").into_response();
    let h = r.headers_mut();
    h.insert(header::LOCATION, HeaderValue::from_static("/"));
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        h.insert(header::SET_COOKIE, v);
    }
    r
}

fn error_response(e: ControlError) -> Response {
    let code = match &e {
        ControlError::RunNotFound(_) => StatusCode::NOT_FOUND,
        ControlError::Invalid { .. } => StatusCode::BAD_REQUEST,
        ControlError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let body = serde_json::json!({ "error": e.to_string() }).to_string();
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn status_json(State(state): State<HttpState>, Path(run): Path<String>) -> Response {
    match run_status(&state.store, &run, state.status).await {
        Ok(s) => (
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::to_string(&s).unwrap_or_default(),
        )
            .into_response(),
        Err(e) => error_response(e),
    }
}

async fn status_page(State(state): State<HttpState>, Path(run): Path<String>) -> Response {
    match run_status(&state.store, &run, state.status).await {
        Ok(s) => (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            render_page(&s),
        )
            .into_response(),
        Err(e) => error_response(e),
    }
}

async fn metrics(State(state): State<HttpState>) -> Response {
    if let Err(e) = state.metrics.refresh(&state.store).await {
        tracing::warn!("failed to read the metrics' state gauges from the database: {e}");
    }
    (
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        state.metrics.render(),
    )
        .into_response()
}

async fn readyz(State(state): State<HttpState>) -> Response {
    let expected = MIGRATIONS.iter().map(|m| m.version).collect::<Vec<_>>();
    let check = async {
        let client = state.store.client().await.map_err(|e| e.to_string())?;
        let rows = client
            .query(crate::store::APPLIED_MIGRATIONS_SQL, &[])
            .await
            .map_err(|e| e.to_string())?;
        let applied: Vec<i32> =
            crate::rows::all("applied.sql", &rows, |r| crate::rows::col(r, "version"))
                .map_err(|e| e.to_string())?;
        if expected.iter().all(|v| applied.contains(v)) {
            Ok(())
        } else {
            Err(format!(
                "migrations applied {applied:?}, expected {expected:?}"
            ))
        }
    };
    match check.await {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()).into_response(),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        )
            .into_response(),
    }
}

fn table<'a>(out: &mut String, title: &str, rows: impl IntoIterator<Item = (&'a String, &'a u64)>) {
    let _ = write!(out, "<h2>{}</h2><table>", esc(title));
    let mut any = false;
    for (k, v) in rows {
        any = true;
        let _ = write!(out, "<tr><td>{}</td><td>{v}</td></tr>", esc(k));
    }
    if !any {
        out.push_str("<tr><td>none</td><td></td></tr>");
    }
    out.push_str("</table>");
}

/// The status page of one run.
pub fn render_page(s: &RunStatus) -> String {
    let mut o = String::new();
    let key = esc(&s.run.run_key);
    let _ = write!(
        o,
        "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"2\">\
         <title>{key}</title><style>body{{font-family:sans-serif}}td{{padding:0 1em}}</style></head><body>\
         <h1>{key}</h1><p>state <b>{}</b>, experiment {}, run {}</p>\
         <p>planned {}, queued {}, running {}, finished {}, retries {}, workers {}</p>",
        esc(s.run.state.as_str()),
        esc(&s.run.experiment),
        s.run.run_id,
        s.planned,
        s.queued,
        s.running,
        s.finished,
        s.retries,
        s.workers
    );
    let _ = write!(
        o,
        "<p>pass rate {} ({} graded), coverage {}, infrastructure errors {}</p>",
        Pct(s.rates.pass_rate),
        s.rates.graded,
        Pct(s.rates.coverage),
        Pct(s.rates.infrastructure_error_rate)
    );
    let throughput = s
        .throughput_per_minute
        .map(|t| format!("{t:.1} trials/min"))
        .unwrap_or_else(|| "n/a".into());
    let eta = s
        .eta
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| "n/a".into());
    let _ = write!(o, "<p>throughput {throughput}, ETA {eta}</p>");
    let _ = write!(o, "<p>{}</p>", esc(&spend_text(&s.spend)));
    if let Some(b) = &s.budget {
        let _ = write!(o, "<p>{}</p>", esc(&b.line()));
    }
    for p in &s.paused_routes {
        let _ = write!(
            o,
            "<p><b>provider route {} paused</b> until {} after {} failures in a row: {}</p>",
            esc(&p.route),
            p.paused_until.format("%Y-%m-%d %H:%M:%S UTC"),
            p.consecutive_failures,
            esc(&p.last_error)
        );
    }
    table(&mut o, "Work items", &s.work_items);
    table(&mut o, "Live attempts", &s.phases);
    table(&mut o, "Outcomes", &s.outcomes);
    o.push_str("<h2>Agents</h2><table><tr><th>agent</th><th>planned</th><th>outcomes</th><th>pass rate</th><th>tokens and cost</th></tr>");
    for a in &s.agents {
        let outcomes: Vec<String> = a.outcomes.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} ({} graded)</td><td>{}</td></tr>",
            esc(&a.agent),
            a.planned,
            esc(&outcomes.join(", ")),
            Pct(a.rates.pass_rate),
            a.rates.graded,
            esc(&spend_text(&a.spend))
        );
    }
    let _ = writeln!(
        o,
        "</table><p>as of {}</p></body></html>",
        s.as_of.format("%Y-%m-%d %H:%M:%S%.3f UTC")
    );
    o
}

/// "tokens 1200 input, 300 cached, 80 output; cost $0.0120 ($0.0060 per solved trial)",
/// with `n/a` for what no record reported.
pub fn spend_text(s: &akbench_core::spend::SpendTotals) -> String {
    use akbench_core::spend::{fmt_count, fmt_usd};
    let mut cost = fmt_usd(s.spend.cost_usd);
    if s.spend.cost_usd.is_some() && s.trials_without_cost > 0 {
        cost.push_str(&format!(" ({} trials without)", s.trials_without_cost));
    }
    format!(
        "tokens {} input, {} cached, {} output; cost {cost} ({} per solved trial)",
        fmt_count(s.spend.input_tokens),
        fmt_count(s.spend.cached_input_tokens),
        fmt_count(s.spend.output_tokens),
        fmt_usd(s.cost_per_solved_usd)
    )
}

#[cfg(test)]
mod tests {
    use super::esc;

    #[test]
    fn escapes_html() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
