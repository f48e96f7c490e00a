---- MODULE no_pre_vote ----
(* Mutant: the election timer starts an election at once, with no pre-vote round (the core with pre_vote off): a follower cut off from a settled leader raises its ballot and the follower it still reaches promises it *)
\* MODEL: ci_prevote
\* EXPECT: StickyLeader
\* OVERRIDE: PreVoteFirst <- MutPreVoteFirst
EXTENDS MultiPaxos
MutPreVoteFirst == FALSE
====
