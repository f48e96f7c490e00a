---- MODULE pre_vote_in_lease ----
(* Mutant: a pre-vote is granted whenever its ballot is above the own one, even by a replica in a live leader's lease (no stickiness): the follower that still hears the leader grants the cut follower's round *)
\* MODEL: ci_prevote
\* EXPECT: StickyLeader
\* OVERRIDE: PreVoteGrantOK <- MutPreVoteGrantOK
EXTENDS MultiPaxos
MutPreVoteGrantOK(r, b) == b > ballot[r]
====
