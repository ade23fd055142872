// Schema: one Ask record per answered question.
CREATE CONSTRAINT ask_key IF NOT EXISTS FOR (a:Ask) REQUIRE a.id IS UNIQUE
