//! The viewer's routes (axum), the same over every [`Source`]: pages, JSON under `/api/...`,
//! server-sent events for a run's progress, and the embedded assets. Read-only: every route
//! is a GET, and no route changes anything in the source.
//!
//! A run's event stream sends its progress when it changes: woken by the source's change
//! signal (a folder re-read) or, for sources that cannot tell, by polling every `poll`.

use crate::compare::{self, CompareQuery, Compared};
use crate::html::{esc, page};
use crate::model::TrialRow;
use crate::pages::{self, RunQuery};
use crate::source::{PageAt, Source, SourceError};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

/// What the handlers share: the source and how often event streams poll it.
#[derive(Debug)]
pub struct Shared<S> {
    /// The data.
    pub source: Arc<S>,
    /// How often a run's event stream re-reads its progress when the source gives no signal.
    pub poll: Duration,
}

impl<S> Clone for Shared<S> {
    fn clone(&self) -> Self {
        Shared {
            source: self.source.clone(),
            poll: self.poll,
        }
    }
}

/// The viewer's pages and API over `source` (the assets are [`assets`], served apart so that
/// they need no authentication where the pages do).
pub fn router<S: Source>(source: Arc<S>, poll: Duration) -> Router {
    Router::new()
        .route("/", get(runs_page::<S>))
        .route("/runs/{run}", get(run_page::<S>))
        .route("/trials/{*trial}", get(trial_page::<S>))
        .route("/compare", get(compare_page::<S>))
        .route("/api/runs", get(api_runs::<S>))
        .route("/api/runs/{run}", get(api_run::<S>))
        .route("/api/runs/{run}/trials", get(api_trials::<S>))
        .route("/api/runs/{run}/events", get(api_events::<S>))
        .with_state(Shared { source, poll })
}

/// The embedded assets (no authentication needed: nothing in them is data).
pub fn assets() -> Router {
    Router::new().route("/assets/{name}", get(asset))
}

const CSP: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:";

/// An HTML response with the viewer's security headers.
pub fn html(status: StatusCode, body: String) -> Response {
    let mut r = (status, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

fn json<T: Serialize>(value: &T) -> Response {
    match serde_json::to_string(value) {
        Ok(s) => ([(header::CONTENT_TYPE, "application/json")], s).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn not_found(what: &str) -> Response {
    html(
        StatusCode::NOT_FOUND,
        page(
            "not found",
            &[],
            &format!("<h1>Not found</h1><p>{}</p>", esc(what)),
        ),
    )
}

fn unavailable(e: &SourceError) -> Response {
    html(
        StatusCode::SERVICE_UNAVAILABLE,
        page(
            "unavailable",
            &[],
            &format!("<h1>Unavailable</h1><p>{}</p>", esc(&e.to_string())),
        ),
    )
}

fn api_error(status: StatusCode, what: &str) -> Response {
    (status, json(&serde_json::json!({ "error": what }))).into_response()
}

/// `?q=` of the runs list.
#[derive(Debug, Default, Deserialize)]
struct Search {
    #[serde(default)]
    q: String,
}

async fn runs_page<S: Source>(State(v): State<Shared<S>>, Query(s): Query<Search>) -> Response {
    match v.source.runs().await {
        Ok(list) => html(StatusCode::OK, pages::runs(&list, &v.source.origin(), &s.q)),
        Err(e) => unavailable(&e),
    }
}

async fn run_page<S: Source>(
    State(v): State<Shared<S>>,
    Path(run): Path<String>,
    Query(q): Query<RunQuery>,
) -> Response {
    match v.source.run(&run, q.at()).await {
        Ok(Some(p)) => html(StatusCode::OK, pages::run(&p, &q)),
        Ok(None) => not_found(&format!("no run `{run}` in {}", v.source.origin())),
        Err(e) => unavailable(&e),
    }
}

async fn trial_page<S: Source>(State(v): State<Shared<S>>, Path(trial): Path<String>) -> Response {
    let doc = match v.source.trial(&trial).await {
        Ok(Some(d)) => d,
        Ok(None) => {
            return not_found(&format!(
                "no trial `{trial}` with a record in {}",
                v.source.origin()
            ))
        }
        Err(e) => return unavailable(&e),
    };
    match tokio::task::spawn_blocking(move || pages::trial(&doc.record, &doc.artifacts)).await {
        Ok(body) => html(StatusCode::OK, body),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn compare_page<S: Source>(
    State(v): State<Shared<S>>,
    Query(q): Query<CompareQuery>,
) -> Response {
    let list = match v.source.runs().await {
        Ok(list) => list,
        Err(e) => return unavailable(&e),
    };
    if q.runs().is_none() {
        // Nothing or one side picked: the picker (a half-filled form is a bad request).
        let half = q.left.as_deref().is_some_and(|s| !s.trim().is_empty())
            || q.right.as_deref().is_some_and(|s| !s.trim().is_empty());
        let status = if half {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        };
        return html(status, compare::page(&list, &q, None));
    }
    let outcome = match v.source.compare(&q).await {
        Ok(o) => o,
        Err(e) => return unavailable(&e),
    };
    let status = match &outcome {
        Compared::Done(_) => StatusCode::OK,
        Compared::UnknownRun { .. } => StatusCode::NOT_FOUND,
        Compared::Refused(_) => StatusCode::UNPROCESSABLE_ENTITY,
    };
    html(status, compare::page(&list, &q, Some(&outcome)))
}

async fn api_runs<S: Source>(State(v): State<Shared<S>>) -> Response {
    match v.source.runs().await {
        Ok(list) => json(&list),
        Err(e) => api_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

async fn api_run<S: Source>(State(v): State<Shared<S>>, Path(run): Path<String>) -> Response {
    // Of a paged run, the summary is null and rates and causes are empty: the progress has
    // the counts and pass rates.
    match v.source.run(&run, PageAt::default()).await {
        Ok(Some(p)) => json(&serde_json::json!({
            "progress": p.progress,
            "summary": p.view.summary,
            "rates": p.view.rates,
            "causes": p.view.causes,
        })),
        Ok(None) => api_error(StatusCode::NOT_FOUND, &format!("no run `{run}`")),
        Err(e) => api_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

#[derive(Serialize)]
struct TrialPage<'a> {
    total: usize,
    page: usize,
    per: usize,
    trials: Vec<&'a TrialRow>,
    /// Of a paged run: the `after` of the next page (`total` is then the done trials).
    #[serde(skip_serializing_if = "Option::is_none")]
    next_after: Option<u64>,
}

async fn api_trials<S: Source>(
    State(v): State<Shared<S>>,
    Path(run): Path<String>,
    Query(q): Query<RunQuery>,
) -> Response {
    let p = match v.source.run(&run, q.at()).await {
        Ok(Some(p)) => p,
        Ok(None) => return api_error(StatusCode::NOT_FOUND, &format!("no run `{run}`")),
        Err(e) => return api_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    };
    let per = q.per();
    if let Some(paged) = &p.paged {
        // One page read alone (`?after=`): no filters.
        return json(&TrialPage {
            total: usize::try_from(p.progress.done).unwrap_or(usize::MAX),
            page: 0,
            per,
            trials: paged.trials.iter().collect(),
            next_after: paged.next,
        });
    }
    let filter = q.filter();
    let mut total = 0;
    let mut trials = Vec::with_capacity(per);
    for t in p.view.filtered(&filter) {
        if total >= q.page * per && trials.len() < per {
            trials.push(t);
        }
        total += 1;
    }
    json(&TrialPage {
        total,
        page: q.page,
        per,
        trials,
        next_after: None,
    })
}

async fn api_events<S: Source>(State(v): State<Shared<S>>, Path(run): Path<String>) -> Response {
    match v.source.progress(&run).await {
        Ok(Some(_)) => {}
        Ok(None) => return api_error(StatusCode::NOT_FOUND, &format!("no run `{run}`")),
        Err(e) => return api_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
    let mut rx = v.source.changes();
    let (tx, events) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(4);
    tokio::spawn(async move {
        let mut last = None;
        let mut signals = true;
        loop {
            // A failed read is skipped: the stream stays open and the next poll tries again.
            if let Ok(progress) = v.source.progress(&run).await {
                if progress.is_some() && progress != last {
                    let data = serde_json::to_string(&progress).unwrap_or_default();
                    if tx
                        .send(Ok(Event::default().event("progress").data(data)))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    last = progress;
                }
            }
            tokio::select! {
                // A source that gives no more signals is polled from then on.
                changed = rx.changed(), if signals => signals = changed.is_ok(),
                () = tokio::time::sleep(v.poll) => {},
                () = tx.closed() => return,
            }
        }
    });
    Sse::new(tokio_stream::wrappers::ReceiverStream::new(events))
        .keep_alive(KeepAlive::default())
        .into_response()
}

async fn asset(Path(name): Path<String>) -> Response {
    let (ty, body) = match name.as_str() {
        "app.js" => ("text/javascript", include_str!("assets/app.js")),
        "guard.js" => ("text/javascript", include_str!("assets/guard.js")),
        "style.css" => ("text/css", include_str!("assets/style.css")),
        _ => return not_found("no such asset"),
    };
    (
        [
            (header::CONTENT_TYPE, ty),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        body,
    )
        .into_response()
}
