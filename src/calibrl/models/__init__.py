"""Models: the tiny Countdown model family calibrl builds itself."""
