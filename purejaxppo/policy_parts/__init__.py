"""The parts `purejaxppo.policy.Policy` is built from, below it and below `acting` (which
uses `Policy`): `kept_state` (the recurrent state a `Policy` keeps between steps),
`predict` (the inputs and numpy actions of Stable-Baselines3's `Policy.predict`) and
`spaces` (`Policy.from_spaces`: an untrained policy from gymnasium spaces alone)."""
