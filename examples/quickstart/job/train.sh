#!/bin/sh
# A stand-in for a training script: each node of the job runs it with its rank set.
echo "rank ${RANK} of ${WORLD_SIZE}: training, job ${MLCOMPUTE_JOB_ID:-?} (master ${MASTER_ADDR}:${MASTER_PORT})"
for epoch in 1 2 3; do
	echo "rank ${RANK}: epoch ${epoch} loss 0.$((9 - epoch * 2))"
	sleep 0.2
done
echo "rank ${RANK}: done"
