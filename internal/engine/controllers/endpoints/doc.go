// Package endpoints is the online endpoints' controller: it keeps every deployment at its
// instance_count instances on the engine's node driver, probes them, rolls deployments
// out before traffic moves, and keeps the scoring router's table in step with the store.
// It reads state, decides, commits, then acts; slow work goes through the work loop
// (package runtime), and each endpoint is reconciled by Reconcile. The endpoints' API
// (package endpointapi) writes the records it runs.
package endpoints
