// Package crd installs CustomResourceDefinitions into a management cluster: each daemon
// embeds the CRDs of the kinds it owns (Cluster API's core kinds in package capi, infrad's and
// clusterd's own beside their code) and calls Install at start, which applies them with
// server-side apply and waits until the apiserver serves them.
package crd
