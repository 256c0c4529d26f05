"""Evaluation: experiments that replay a dataset's items through agent versions and score the
answers, and rules that score a sample of live runs."""
