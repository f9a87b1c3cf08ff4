"""L6.5 human review: the review of flagged rows in a browser (queue, votes log, web app,
server) and its finish into a validated overlay."""
