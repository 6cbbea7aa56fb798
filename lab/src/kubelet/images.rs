//! The images on each node and the registry they come from. The lab cannot look inside
//! images (the topology's `images:` list says what they hold), so every image pulls,
//! except one a fault made the registry refuse (`valtune-lab fault image-fail`): its
//! pull fails as containerd's does when the registry has no such manifest. A pulled image
//! stays on its node (`<lab>/nodes/<node>/images`), so a pod with `imagePullPolicy:
//! IfNotPresent` starts from it even while the registry refuses it, as after a pre-pull.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::RwLock;

/// A reference as containerd resolves it: `docker.io/library/` before a single name,
/// `docker.io/` before a path without a registry host, `:latest` without a tag.
pub fn normalized(image: &str) -> String {
    let (name, rest) = match image.find('@') {
        Some(at) => (&image[..at], &image[at..]),
        None => (image, ""),
    };
    let tagged = name
        .rsplit('/')
        .next()
        .is_some_and(|last| last.contains(':'));
    let first = name.split('/').next().unwrap_or(name);
    let host =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let path = match (host, name.contains('/')) {
        (true, _) => name.to_string(),
        (false, true) => format!("docker.io/{name}"),
        (false, false) => format!("docker.io/library/{name}"),
    };
    let tag = if tagged || !rest.is_empty() {
        ""
    } else {
        ":latest"
    };
    format!("{path}{tag}{rest}")
}

/// What containerd says of a pull of an image the registry does not have
/// (containerd/core/remotes/docker/resolver.go: "not found", wrapped by the CRI's
/// `failed to pull and unpack image`), as the kubelet reports it.
pub fn not_found(image: &str) -> String {
    let r = normalized(image);
    format!(
        "rpc error: code = NotFound desc = failed to pull and unpack image \"{r}\": failed to resolve reference \"{r}\": {r}: not found"
    )
}

/// The nodes' images and the registry's refusals.
#[derive(Debug, Default)]
pub struct Images {
    /// The lab's directory (None: nothing is kept on disk).
    dir: Option<PathBuf>,
    refused: RwLock<BTreeSet<String>>,
    nodes: RwLock<BTreeMap<String, BTreeSet<String>>>,
}

impl Images {
    pub fn new(dir: Option<PathBuf>) -> Images {
        Images {
            dir,
            ..Default::default()
        }
    }

    fn file(&self, node: &str) -> Option<PathBuf> {
        Some(self.dir.as_ref()?.join("nodes").join(node).join("images"))
    }

    /// The images on `node` (read from its file the first time).
    fn load(&self, node: &str) {
        if self.nodes.read().expect("lock").contains_key(node) {
            return;
        }
        let kept: BTreeSet<String> = self
            .file(node)
            .and_then(|f| std::fs::read_to_string(f).ok())
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect();
        self.nodes
            .write()
            .expect("lock")
            .entry(node.into())
            .or_insert(kept);
    }

    /// The registry refuses `image` (or serves it again).
    pub fn refuse(&self, image: &str, refused: bool) {
        let mut r = self.refused.write().expect("lock");
        if refused {
            r.insert(normalized(image));
        } else {
            r.remove(&normalized(image));
        }
    }

    pub fn refused(&self) -> BTreeSet<String> {
        self.refused.read().expect("lock").clone()
    }

    /// `image` is on `node` now.
    pub fn pulled(&self, node: &str, image: &str) {
        self.load(node);
        let mut nodes = self.nodes.write().expect("lock");
        let set = nodes.entry(node.into()).or_default();
        if set.insert(normalized(image))
            && let Some(f) = self.file(node)
        {
            let text: String = set.iter().map(|i| format!("{i}\n")).collect();
            if let Some(dir) = f.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = std::fs::write(f, text);
        }
    }

    /// What a pod on `node` finds (the lifecycle's view).
    pub fn on<'a>(&'a self, node: &'a str) -> OnNode<'a> {
        self.load(node);
        OnNode { images: self, node }
    }
}

/// The images of one node and the registry, as the lifecycle asks.
pub struct OnNode<'a> {
    images: &'a Images,
    node: &'a str,
}

impl super::lifecycle::Images for OnNode<'_> {
    fn present(&self, image: &str) -> bool {
        self.images
            .nodes
            .read()
            .expect("lock")
            .get(self.node)
            .is_some_and(|s| s.contains(&normalized(image)))
    }

    fn pull(&self, image: &str) -> Result<(), String> {
        match self
            .images
            .refused
            .read()
            .expect("lock")
            .contains(&normalized(image))
        {
            true => Err(not_found(image)),
            false => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::lifecycle::Images as _;
    use super::*;

    #[test]
    fn references_are_normalized_as_containerd_does() {
        for (given, full) in [
            ("python:3.13-alpine", "docker.io/library/python:3.13-alpine"),
            ("anzaxyz/agave:v4.0.3", "docker.io/anzaxyz/agave:v4.0.3"),
            ("ghcr.io/valtune/valtune", "ghcr.io/valtune/valtune:latest"),
            (
                "registry.local:5000/agave:v4",
                "registry.local:5000/agave:v4",
            ),
            ("busybox@sha256:01", "docker.io/library/busybox@sha256:01"),
        ] {
            assert_eq!(normalized(given), full, "{given}");
        }
        assert_eq!(
            not_found("agave:v9"),
            "rpc error: code = NotFound desc = failed to pull and unpack image \"docker.io/library/agave:v9\": failed to resolve reference \"docker.io/library/agave:v9\": docker.io/library/agave:v9: not found"
        );
    }

    /// A refused image does not pull; one already on the node is there still.
    #[test]
    fn a_refused_image_stays_on_the_nodes_that_pulled_it() {
        let images = Images::new(None);
        images.pulled("a", "anzaxyz/agave:v4.0.3");
        images.refuse("docker.io/anzaxyz/agave:v4.0.3", true);
        assert!(images.on("a").present("anzaxyz/agave:v4.0.3"));
        assert!(!images.on("b").present("anzaxyz/agave:v4.0.3"));
        assert!(images.on("b").pull("anzaxyz/agave:v4.0.3").is_err());
        images.refuse("anzaxyz/agave:v4.0.3", false);
        assert_eq!(images.on("b").pull("anzaxyz/agave:v4.0.3"), Ok(()));
    }
}
