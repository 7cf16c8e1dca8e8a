"""The Blind Cliffwalk experiment of Schaul et al. (2016), Section 3.1 and Appendix B.1:
`python -m cliffwalk`."""
