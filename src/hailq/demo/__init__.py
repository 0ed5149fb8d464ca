"""``hailq demo``: the hailstorm of seed 000, in scaled time, with a live view and a report.

An insurer's customer portal sends 20,000 damage claims in a burst; 50 image
checkers compete for them; a statistics program gets a copy of each. During the
run one of the checkers crashes mid-claim, one claim has a corrupt photo, and
one of the checkers is slower than its lease. The report shows that nothing was lost or
done twice, and how close the run came to the ideal makespan.

Modules: ``story`` (the claims and the scaled times), ``results`` (the
insurer's results database), ``checkers`` (the image check and the two odd
checkers), ``roles`` (the portal, the statistics program and the checker
that crashes, as processes of their own), ``children`` (starting and hearing
those processes), ``run`` (the orchestration), ``report`` and ``view``.
"""
