"""The progress bar's return entry (`drivers.single.return_postfix`): Atari's raw game score."""

import numpy as np
import pandas as pd

from purejaxppo.drivers.single import return_postfix

NAN = np.nan


def test_game_score_is_the_episode_weighted_ratio_over_the_segment():
    # update 1: 4 one-life episodes ended, 1/4 of them a game over with score 200 (mean 50);
    # update 2: none ended (NaN); update 3: 2 ended, both game overs, scores 300 and 500.
    frame = pd.DataFrame(
        {
            "episode_return": [1.0, NAN, 3.0],  # clipped one-life returns
            "episode_count": [4.0, 0.0, 2.0],
            "info/game_over_return": [50.0, NAN, 400.0],
            "info/game_over": [0.25, NAN, 1.0],
        }
    )
    # (50 * 4 + 400 * 2) / (0.25 * 4 + 1.0 * 2) = 1000 / 3 games
    assert return_postfix(frame) == {"game": "333.3"}


def test_game_score_without_episode_count_weighs_rows_equally():
    frame = pd.DataFrame(
        {
            "episode_return": [1.0, 2.0],
            "info/game_over_return": [100.0, 30.0],
            "info/game_over": [0.5, 0.5],
        }
    )
    assert return_postfix(frame) == {"game": "130.0"}


def test_no_game_over_in_the_segment_shows_n_a():
    frame = pd.DataFrame(
        {
            "episode_return": [1.0, 2.0],
            "episode_count": [3.0, 5.0],
            "info/game_over_return": [0.0, NAN],
            "info/game_over": [0.0, NAN],
        }
    )
    assert return_postfix(frame) == {"game": "n/a"}


def test_without_the_atari_metrics_the_newest_episode_return_is_shown():
    frame = pd.DataFrame({"episode_return": [10.0, 20.5, NAN], "info/game_over": [1.0, 1.0, 1.0]})
    assert return_postfix(frame) == {"ret": "20.5"}
    assert return_postfix(pd.DataFrame({"episode_return": [NAN, NAN]})) == {"ret": "n/a"}
