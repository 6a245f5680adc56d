// Package autoscale is the endpoint autoscaling rule (scale_settings.type =
// "target_utilization", DESIGN sections 3 and 4): from the router's own counts of requests in
// flight to one deployment, its settings, its current instance count and the time, it
// decides how many instances the deployment should have and why. It is pure: the caller
// passes the time, and History is a small value the caller keeps between calls (Observe
// returns the new one); nothing here reads a clock, keeps state or starts a goroutine, so
// every clause is a table test on a fake clock.
//
// # Rules
//
//  1. Load is the number of requests in flight to the deployment (held requests included,
//     mirrored copies excluded), sampled every polling_interval. The need for a load is
//     ceil(load / (max_concurrent_requests_per_instance × target_utilization_percentage / 100)),
//     and the desired count is always clamped to [min_instances, max_instances].
//  2. A count outside [min_instances, max_instances] (the settings changed) goes to the
//     nearest bound at once.
//  3. From zero: a request arriving while the count is 0 decides at once (the router kicks
//     the rule; no polling wait), for the need of what is in flight and at least one. A
//     kick (Sample.Kick) is a reading out of turn: it decides only this, marks the request
//     as activity, and is not a sample of the windows of rules 4 and 5, so held requests
//     neither hurry nor hold back the polling samples' decisions.
//  4. Up: on the average load of the short window (the last UpWindow = 6 samples, never
//     older than 6 polling intervals and never older than the last scale-down, so a step
//     down is not undone by the load it just measured), and only below max_instances: it
//     goes up when the window's average is more than UpTolerancePercent (10%) above what
//     the count serves at the target, and either the lower of the last two samples is too
//     (then to the larger of the average's need and that sample's need) or the average has
//     been for UpSustain (3) samples in a row (then to the average's need). So a step of
//     load is followed in one decision at its second sample, within two polling intervals,
//     and a square wave moves up once per rise; a single-sample spike moves nothing unless
//     it keeps the average above the band for three samples. At max_instances the up check
//     is skipped, so it never stands in the way of a step down.
//  5. Down: only when the highest need sampled over the last scale_down_delay is below the
//     current count, and then one step, to that need. Our addition: "below" means more than
//     DownTolerancePercent (10%) below, the hysteresis band of rule 7 (2 → 1 goes down,
//     10 → 9 does not). Each sample's need refreshes the time
//     the deployment last needed that many instances, so demand that comes back restarts
//     the window. Until the history covers a whole scale_down_delay (after an engine start)
//     nothing goes down.
//  6. To zero: only with min_instances = 0 and no request at all (none in flight, none
//     arrived between samples) for scale_to_zero_delay (default: scale_down_delay); until
//     then a deployment whose need fell to 0 keeps one instance.
//  7. Hysteresis: up follows the average of the short window, down the peak of the long one,
//     each with a 10% band. A constant load with ±10% noise, from the count its mean needs,
//     makes no decision at all: its average never leaves the up band, its peak needs at
//     least the count, and the down band keeps a rare low stretch of noise (no peak for a
//     whole short scale_down_delay) from stepping down and back up. Up is checked first, so
//     both can never apply at once.
//
// Memory is bounded: History keeps UpWindow samples and one time per possible instance
// (max_instances, itself bounded by validation), whatever the delays.
package autoscale
