//! The lab's kubelet: what a kubelet does with the containers of the pods on its node,
//! for every lab node.
//!
//! - [`privileges`]: what a container may do, as the kubelet and containerd set it up.

pub mod privileges;
