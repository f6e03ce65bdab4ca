// Package csi is Cairn's Container Storage Interface driver
// (docs/kubernetes.md): ReadWriteMany volumes for pods, each a directory
// of a bucket. The controller service makes and removes volumes'
// directories through a Cairn node's API (the admin key); the node
// service bind-mounts a volume's directory, from this host's Cairn mount
// of its bucket (MountRoot/BUCKET, which must be a live FUSE mount),
// opened beneath it with no symbolic link followed and bound by its
// descriptor, onto the pod's target path, and unmounts it. It owns no
// data and no Cairn state: a volume is what the bucket holds.
package csi
