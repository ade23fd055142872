// Schema: one LinkWord (a word of the dataset's entity names, how many names hold it) per
// (dataset, word); also the index behind the linker's lookup of a question's words.
CREATE CONSTRAINT link_word_key IF NOT EXISTS FOR (w:LinkWord) REQUIRE (w.dataset, w.word) IS UNIQUE
