//! Recording webhook exchanges and answering calls from recordings. (Being written.)
