//! The viewer's HTTP server (axum): pages, JSON under `/api/...`, server-sent events for a
//! run's progress, and the embedded assets. Read-only: every route is a GET and nothing
//! writes to the viewed folder.
//!
//! A background task re-reads the folder every `poll` interval ([`Index::refresh`], which
//! reads only changed files) and bumps a version that the event streams wait on.

use super::html::{esc, page};
use super::index::{Index, Scan, TrialRow};
use super::pages::{self, RunQuery};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::watch;

/// Shared state of the server.
#[derive(Debug, Clone)]
pub struct Viewer {
    index: Arc<RwLock<Index>>,
    /// Reading happens outside the index's lock: pages are served while a folder is walked.
    scan: Arc<std::sync::Mutex<Scan>>,
    version: watch::Sender<u64>,
}

impl Viewer {
    /// A viewer over an index (already refreshed once by the caller, or built in memory).
    pub fn new(mut index: Index) -> Viewer {
        let v = index.version;
        let scan = std::mem::take(&mut index.scan);
        Viewer {
            index: Arc::new(RwLock::new(index)),
            scan: Arc::new(std::sync::Mutex::new(scan)),
            version: watch::channel(v).0,
        }
    }

    /// Re-reads the folder; on change, wakes the event streams. Returns true on change.
    pub fn refresh(&self) -> bool {
        let update = self.scan.lock().unwrap_or_else(|e| e.into_inner()).update();
        let Some(update) = update else {
            return false;
        };
        let mut ix = self.index.write().unwrap_or_else(|e| e.into_inner());
        ix.apply(update);
        self.version.send_replace(ix.version);
        true
    }

    /// Event streams open right now.
    pub fn subscribers(&self) -> usize {
        self.version.receiver_count()
    }

    /// Refreshes the index every `poll` until the returned task is dropped or aborted.
    pub fn spawn_poller(&self, poll: Duration) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(poll);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let m = me.clone();
                if tokio::task::spawn_blocking(move || m.refresh())
                    .await
                    .is_err()
                {
                    return;
                }
            }
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// The viewer's routes.
pub fn router(v: Viewer) -> Router {
    Router::new()
        .route("/", get(runs_page))
        .route("/runs/{run}", get(run_page))
        .route("/trials/{*trial}", get(trial_page))
        .route("/compare", get(compare_page))
        .route("/api/runs", get(api_runs))
        .route("/api/runs/{run}", get(api_run))
        .route("/api/runs/{run}/trials", get(api_trials))
        .route("/api/runs/{run}/events", get(api_events))
        .route("/assets/{name}", get(asset))
        .with_state(v)
}

/// Serves `router` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    v: Viewer,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(v))
        .with_graceful_shutdown(shutdown)
        .await
}

const CSP: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:";

fn html(status: StatusCode, body: String) -> Response {
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

fn api_not_found(what: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        json(&serde_json::json!({ "error": what })),
    )
        .into_response()
}

/// `?q=` of the runs list.
#[derive(Debug, Default, Deserialize)]
struct Search {
    #[serde(default)]
    q: String,
}

async fn runs_page(State(v): State<Viewer>, Query(s): Query<Search>) -> Response {
    html(StatusCode::OK, pages::runs(&v.read(), &s.q))
}

async fn run_page(
    State(v): State<Viewer>,
    Path(run): Path<String>,
    Query(q): Query<RunQuery>,
) -> Response {
    let ix = v.read();
    match ix.runs.get(&run) {
        Some(r) => html(StatusCode::OK, pages::run(r, &q)),
        None => not_found(&format!("no run `{run}` under this folder")),
    }
}

async fn trial_page(State(v): State<Viewer>, Path(trial): Path<String>) -> Response {
    let file = v.read().trial_file(&trial).map(|p| p.to_path_buf());
    let Some(file) = file else {
        return not_found(&format!("no trial `{trial}` under this folder"));
    };
    match tokio::task::spawn_blocking(move || pages::trial(&file)).await {
        Ok(Ok(body)) => html(StatusCode::OK, body),
        Ok(Err(e)) => not_found(&format!("the record of `{trial}` cannot be shown: {e}")),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn compare_page() -> Response {
    // COMPARE: the paired view of `run compare` (core::compare) is served here when it lands.
    html(
        StatusCode::NOT_IMPLEMENTED,
        page(
            "compare",
            &[],
            "<h1>Compare runs</h1><p>Not in the viewer yet: use <code>akbench run compare</code>.</p>",
        ),
    )
}

#[derive(Serialize)]
struct RunListItem<'a> {
    key: &'a str,
    done: u64,
    planned: Option<u64>,
    agents: &'a [String],
    tasks: usize,
    pass_rate: Option<f64>,
    solve_rate: Option<f64>,
}

async fn api_runs(State(v): State<Viewer>) -> Response {
    let ix = v.read();
    let runs: Vec<RunListItem> = ix
        .runs
        .values()
        .map(|r| RunListItem {
            key: &r.key,
            done: r.trials.len() as u64,
            planned: r.planned,
            agents: &r.agents,
            tasks: r.tasks.len(),
            pass_rate: r.summary.as_ref().and_then(|s| s.total.rates.pass_rate),
            solve_rate: r.summary.as_ref().and_then(|s| s.total.rates.solve_rate),
        })
        .collect();
    json(&serde_json::json!({ "runs": runs, "refused": ix.refused }))
}

async fn api_run(State(v): State<Viewer>, Path(run): Path<String>) -> Response {
    let ix = v.read();
    let Some(r) = ix.runs.get(&run) else {
        return api_not_found(&format!("no run `{run}`"));
    };
    json(&serde_json::json!({
        "progress": r.progress(),
        "summary": r.summary,
        "rates": r.rates,
        "causes": r.causes,
    }))
}

#[derive(Serialize)]
struct TrialPage<'a> {
    total: usize,
    page: usize,
    per: usize,
    trials: Vec<&'a TrialRow>,
}

async fn api_trials(
    State(v): State<Viewer>,
    Path(run): Path<String>,
    Query(q): Query<RunQuery>,
) -> Response {
    let ix = v.read();
    let Some(r) = ix.runs.get(&run) else {
        return api_not_found(&format!("no run `{run}`"));
    };
    let per = q.per();
    let filter = q.filter();
    let mut total = 0;
    let mut trials = Vec::with_capacity(per);
    for t in r.filtered(&filter) {
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
    })
}

async fn api_events(State(v): State<Viewer>, Path(run): Path<String>) -> Response {
    if !v.read().runs.contains_key(&run) {
        return api_not_found(&format!("no run `{run}`"));
    }
    let mut rx = v.version.subscribe();
    let (tx, events) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(4);
    tokio::spawn(async move {
        let mut last = None;
        loop {
            let progress = v.read().runs.get(&run).map(|r| r.progress());
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
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return },
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
