"""Human start points for the human-starts protocol, from play to a verified start-state file;
its commands are ``python -m evaluation.human_starts``. Nothing is imported here: the evaluator
needs the file format and the verification, not the recording tools."""
