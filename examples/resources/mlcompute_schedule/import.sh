# A schedule is imported by its ID, /workspaces/{workspace}/schedules/{name}.
terraform import mlcompute_schedule.nightly /workspaces/team-a/schedules/nightly
