"""Realistic meeting text for the meeting-brief tests (import as `from meeting_transcripts import ...`)."""

PLATFORM_SYNC = """\
[00:00:04] Priya Nair (EM): Morning all. Three things today: the payments vendor, the beta date, and on-call.
[00:01:12] Tom Becker: I compared Stripe and Adyen last week. Adyen is cheaper at our volume but the integration is two sprints.
[00:02:30] Priya Nair (EM): Okay, so we're going with Stripe for the marketplace payments.
[00:02:41] Luis Ortega: Agreed.
[00:03:05] Luis Ortega: Have we decided on the beta date yet?
[00:03:20] Priya Nair (EM): Not decided yet, we'll see after the load test.
[00:04:48] Tom Becker: The load test needs the staging cluster resized first.
[00:05:10] Priya Nair (EM): Action item: Tom to resize the staging cluster by Thursday.
[00:06:02] Luis Ortega: For on-call, I propose we move to weekly rotations.
[00:06:40] Priya Nair (EM): We agreed to move on-call to weekly rotations starting next Monday.
[00:07:15] Tom Becker: What about the flaky checkout test?
[00:07:30] Luis Ortega: Still debating whether to quarantine it.
"""

PLATFORM_SUMMARY = (
    "Payments vendor chosen. We decided to drop support for API v1 at the end of the quarter. Beta date still open."
)

DECISION_LINES = [
    "Pricing review, 14 March.",
    "Attendees: Ana, Bo, Chen.",
    "The team discussed usage-based pricing for the Fleet tier.",
    "Decision: the Starter tier stays at $49 per month.",
    "Approved: a 10% discount for annual Fleet contracts.",
    "Open question: should Enterprise include SSO by default?",
    "Action item: Bo will ship the new pricing page on March 28.",
]
