//! A task's image, ready for the `container` runtime: its tag resolved when the task does
//! not pin a digest (`run single`; a plan pins it when the run is planned), pulled,
//! verified, unpacked and held in use for the attempt.

use super::{ImageError, Store, Unpacked};
use crate::runtime::container::{self, Image};
use akbench_core::task::Task;

/// Why a task's image is not ready.
#[derive(Debug, thiserror::Error)]
pub enum TaskImageError {
    /// The task or the configuration is wrong (the run is refused).
    #[error("{0}")]
    Refused(String),
    /// The registry or the cache failed (an infrastructure problem, retried).
    #[error(transparent)]
    Pull(#[from] ImageError),
}

/// The image `task` runs in under the `container` runtime, held in use until the returned
/// [`Unpacked`] is dropped.
pub fn for_task(store: &Store, task: &Task) -> Result<(Unpacked, Image), TaskImageError> {
    let Some(image) = &task.image else {
        return Err(TaskImageError::Refused(format!(
            "task `{}` names no image (`environment.image` in its task.toml), and the `container` runtime runs a task in its image; fix: name one, or choose `runtime: sandbox`",
            task.release.id
        )));
    };
    let pinned = match &image.digest {
        Some(_) => image.clone(),
        None => image.with_digest(&store.resolve(image)?),
    };
    let unpacked = store.ensure(&pinned)?;
    let user = container::image_user(unpacked.run.user.as_deref(), &unpacked.rootfs)
        .map_err(|e| TaskImageError::Refused(format!("task `{}`: {e}", task.release.id)))?;
    let view = Image {
        user,
        pinned: pinned.pinned(&unpacked.digest),
        rootfs: unpacked.rootfs.clone(),
        run: unpacked.run.clone(),
        workdir: container::workdir(task.image_workdir.as_deref(), &unpacked.run),
    };
    // Harbor's `[agent] user` / `[verifier] user`, looked up in the image now (a name it
    // does not have is the task's error); where each may run: `container::phase_users`.
    for (field, named) in [
        ("agent.user", task.file.agent.user.as_deref()),
        ("verifier.user", task.file.verifier.user.as_deref()),
    ] {
        container::phase_ids(&view, named, field)
            .map_err(|e| TaskImageError::Refused(format!("task `{}`: {e}", task.release.id)))?;
    }
    Ok((unpacked, view))
}

/// The images of `world`'s sidecar services (each pinned by its compose file), in the
/// compose file's order: (service name, its view, held in use until dropped). A service's
/// `user:` and `working_dir:` replace its image's.
pub fn for_services(
    store: &Store,
    world: &akbench_core::task::world::World,
) -> Result<Vec<(String, Image, Unpacked)>, TaskImageError> {
    world
        .services
        .iter()
        .map(|s| {
            let Some(pin) = &s.image else {
                return Err(TaskImageError::Refused(format!(
                    "service `{}` is built from `build:` and has no image yet; fix: run `akbench image build TASK --push REGISTRY`, which writes it into task.toml",
                    s.name
                )));
            };
            let unpacked = store.ensure(pin)?;
            let user = container::image_user(
                s.user.as_deref().or(unpacked.run.user.as_deref()),
                &unpacked.rootfs,
            )
            .map_err(|e| TaskImageError::Refused(format!("service `{}`: {e}", s.name)))?;
            let workdir = s
                .working_dir
                .clone()
                .or_else(|| unpacked.run.working_dir.clone())
                .unwrap_or_else(|| "/".into());
            let image = Image {
                user,
                pinned: pin.pinned(&unpacked.digest),
                rootfs: unpacked.rootfs.clone(),
                run: unpacked.run.clone(),
                workdir,
            };
            Ok((s.name.clone(), image, unpacked))
        })
        .collect()
}
