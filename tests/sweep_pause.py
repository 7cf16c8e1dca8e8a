"""A Hydra callback for tests of stopping a sweep: each job holds after the step `step`
(`+hydra.callbacks.pause.step=N`), its checkpoint there written, until it is asked to stop, so
that the stop comes at that step on a fast machine and a slow one alike. A resumed job starts
past it and does not hold."""

import time

from hydra.experimental.callback import Callback


class PauseAfterStep(Callback):
    def __init__(self, step: int):
        self.step = step

    def on_job_start(self, config, **kwargs) -> None:
        """In the process that runs the job, before train.py's main."""
        from training import loop

        act_and_store = loop.Training._act_and_store
        held_step = self.step + 1

        def hold_then_act(training) -> None:
            if training.step == held_step:
                while training.stop.signal is None:
                    time.sleep(0.01)
            act_and_store(training)

        loop.Training._act_and_store = hold_then_act
