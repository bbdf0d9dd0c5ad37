//! The control-plane tests' coordinator: served in-process on loopback over a fresh private
//! PostgreSQL, with its clients (plain, or sending a bearer token), and the documents they
//! submit (a synthetic spec and its ready plan on a fixed clock).

use akbench_coordinator::auth::Tokens;
use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::server::{serve_with, Config, ServeHandle, Services};
use akbench_coordinator::store::Store;
use akbench_core::clock::ManualClock;
use akbench_core::digest::canonical_json;
use akbench_core::plan::{plan, RunPlan};
use akbench_core::spec::ResolvedRunSpec;
use akbench_core::testkit::synthetic_spec;
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use chrono::TimeZone;
use tokio::sync::oneshot;
use tonic::transport::Channel;
use tonic::Request;

/// A coordinator serving until [`Coordinator::stop`].
pub struct Coordinator {
    handle: Option<ServeHandle>,
    stop: Option<oneshot::Sender<()>>,
}

impl Coordinator {
    /// Serves `services` on a fresh database.
    pub async fn serve(services: Services) -> Coordinator {
        let url = test_support::fresh_database().await;
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = serve_with(Config::local(url), services, async move {
            let _ = stopped.await;
        })
        .await
        .expect("serves");
        Coordinator {
            handle: Some(handle),
            stop: Some(stop),
        }
    }

    /// With the coordinator's own scheduler (`work: None`: no double answers start, resume
    /// or cancel) and the tokens of the configuration and environment.
    pub async fn open() -> Coordinator {
        Coordinator::serve(Services {
            work: None,
            ..Services::default()
        })
        .await
    }

    /// With the coordinator's own scheduler and `tokens`.
    pub async fn start(tokens: Tokens) -> Coordinator {
        Coordinator::serve(Services {
            work: None,
            tokens: Some(tokens),
            ..Services::default()
        })
        .await
    }

    pub fn handle(&self) -> &ServeHandle {
        self.handle.as_ref().unwrap()
    }

    pub fn store(&self) -> &Store {
        &self.handle().store
    }

    /// A channel connected to its gRPC listener.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.handle().grpc_addr))
            .unwrap()
            .connect()
            .await
            .expect("connects")
    }

    /// A control client with tonic's default message limits.
    pub async fn client(&self) -> ControlClient<Channel> {
        ControlClient::new(self.channel().await)
    }

    /// A control client sending `token` (if any) as a bearer token, messages up to 512 MiB.
    pub async fn client_as(
        &self,
        token: Option<&str>,
    ) -> ControlClient<
        tonic::service::interceptor::InterceptedService<
            Channel,
            impl FnMut(Request<()>) -> Result<Request<()>, tonic::Status> + Clone,
        >,
    > {
        let header = token.map(|t| {
            format!("Bearer {t}")
                .parse::<tonic::metadata::MetadataValue<_>>()
                .unwrap()
        });
        ControlClient::with_interceptor(self.channel().await, move |mut r: Request<()>| {
            if let Some(h) = header.clone() {
                r.metadata_mut().insert("authorization", h);
            }
            Ok(r)
        })
        .max_decoding_message_size(512 << 20)
        .max_encoding_message_size(512 << 20)
    }

    /// Stops it and waits until it has stopped cleanly.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.handle
            .take()
            .unwrap()
            .wait()
            .await
            .expect("stops cleanly");
    }
}

/// The fixed clock the documents are made on.
pub fn clock() -> ManualClock {
    ManualClock::new(chrono::Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap())
}

/// A spec with `tasks` x 2 agents x `reps` trials and its ready plan.
pub fn run_docs(tasks: usize, reps: u32) -> (ResolvedRunSpec, RunPlan) {
    let c = clock();
    let spec = synthetic_spec(tasks, 2, reps, &c);
    let ready = plan(&spec, &c).ready();
    (spec, ready)
}

/// `SubmitPlan` of `spec` and its plan `plan`, whole.
pub fn submit_request(spec: &ResolvedRunSpec, plan: &RunPlan) -> pb::SubmitPlanRequest {
    pb::SubmitPlanRequest {
        spec_json: canonical_json(spec),
        spec_digest: spec.digest.clone(),
        plan_json: canonical_json(plan),
        plan_digest: plan.digest.clone(),
    }
}
