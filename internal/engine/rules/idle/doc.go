// Package idle decides when a compute instance has been idle long enough to stop
// (idle_time_before_shutdown, DESIGN sections 3 and 4). It is pure: the caller passes the
// stored activity, the setting and, where needed, the time; nothing here reads a clock,
// keeps state or starts a goroutine, so each rule is a table test with fixed times. The
// engine puts the deadline in its timer queue and, when it passes, stops the instance with
// last_operation.trigger = IdleShutdown.
//
// # Rules
//
//  1. What keeps an instance awake: a running job, an open session (`mlcompute compute exec`),
//     and activity reported through the API by applications on the node.
//     While a job runs or a session is open the instance never stops, however long ago its
//     last activity was.
//  2. Otherwise it stops at LastActivity + idle_time_before_shutdown. The engine records
//     LastActivity when the instance starts, when a job ends, when a session closes and when
//     activity is reported (Touch keeps the latest, so a late or out-of-order report never
//     moves the clock back). A zero LastActivity counts as idle since forever, as a zero
//     IdleSince does for cluster nodes: the engine must record one.
//  3. An idle setting of zero (null in Terraform: never) never stops the instance.
//  4. The stop is due once the time reaches the deadline (at deadline - 1ns the instance is
//     still running), like cluster idle scale-down.
//  5. Changing the setting (OnSettingChange): shortening it to or below the time the
//     instance has already been idle resets the idle clock to 0 (as Azure does), so an
//     apply never stops an instance on the spot; it stops one full new setting later.
//     Turning idle shutdown on where it was off counts as shortening (from "never").
//     Shortening to a value still above the current idle time, lengthening, and turning it
//     off change nothing. A busy instance is not idle, so its clock is not reset either.
//
// Stopped instances are not this package's concern: the engine asks only about running
// ones.
package idle
